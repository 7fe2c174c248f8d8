package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// llama.cpp's flavor: llama-server's routes and answers (see flavors.go
// for the facts and their sources).

// llamaBuild is the build_info and system_fingerprint the simulator
// reports as llama-server.
const llamaBuild = "b0-gendex-sim"

// llamaRoutes is llama-server's router. Its pre-routing handler answers
// 503 "Loading model" to every path while the model loads, then checks the
// API key; cpp-httplib answers 404 "File Not Found" to a path no handler
// serves for the request's method.
func (s *Server) llamaRoutes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/health":              {get, s.handleLlamaHealth},
		"/v1/health":           {get, s.handleLlamaHealth},
		"/v1/models":           {get, s.handleLlamaModels},
		"/models":              {get, s.handleLlamaModels},
		"/props":               {get, s.handleLlamaProps},
		"/metrics":             {get, s.handleLlamaMetrics},
		"/completion":          {post, s.handleLlamaCompletion},
		"/completions":         {post, s.handleLlamaCompletion},
		"/v1/completions":      {post, s.handleLlamaCompletion},
		"/v1/chat/completions": {post, s.handleLlamaChat},
		"/chat/completions":    {post, s.handleLlamaChat},
		"/tokenize":            {post, s.handleLlamaTokenize},
		"/detokenize":          {post, s.handleLlamaDetokenize},
		"/apply-template":      {post, s.handleLlamaApplyTemplate},
	}
	public := map[string]bool{"/health": true, "/v1/health": true, "/models": true, "/v1/models": true}
	notFound := func(w http.ResponseWriter) {
		writeRaw(w, http.StatusNotFound, "application/json; charset=utf-8",
			[]byte(`{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`))
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodOptions {
				writeRaw(w, http.StatusOK, "text/html", nil)
				return false
			}
			if s.warmingUp() {
				writeRaw(w, http.StatusServiceUnavailable, "application/json; charset=utf-8",
					[]byte(`{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`))
				return false
			}
			if s.cfg.APIKey == "" || public[r.URL.Path] {
				return true
			}
			key := r.Header.Get("Authorization")
			if key == "" {
				key = r.Header.Get("X-Api-Key")
			}
			if strings.TrimPrefix(key, "Bearer ") == s.cfg.APIKey {
				return true
			}
			writeRaw(w, http.StatusUnauthorized, "application/json; charset=utf-8",
				[]byte(`{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}`))
			return false
		},
		notFound:  notFound,
		badMethod: func(w http.ResponseWriter, _ route) { notFound(w) },
	}
}

// writeLlamaError writes format_error_response's shape: {"error":{"code",
// "message","type"}} with the status of its type.
func writeLlamaError(w http.ResponseWriter, status int, typ, msg string, extra ...kv) {
	e := append([]kv{{"code", status}, {"message", msg}, {"type", typ}}, extra...)
	writeRaw(w, status, "application/json; charset=utf-8", orderedJSON([]kv{{"error", orderedJSON(e)}}))
}

// llamaInvalid writes a 400 invalid_request_error.
func llamaInvalid(w http.ResponseWriter, msg string) {
	writeLlamaError(w, http.StatusBadRequest, "invalid_request_error", msg)
}

// readLlamaBody reads and parses a JSON body as json::parse does; a parse
// failure escapes the handler as a 500 server_error. A body that is not an
// object reads as an empty one (every field lookup misses).
func readLlamaBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false
	}
	return parseLlamaBody(w, body)
}

func parseLlamaBody(w http.ResponseWriter, body []byte) (map[string]json.RawMessage, bool) {
	if !json.Valid(body) {
		writeLlamaError(w, http.StatusInternalServerError, "server_error",
			"[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while parsing value")
		return nil, false
	}
	m, _ := asObject(body)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, true
}

// handleLlamaHealth serves /health: {"status":"ok"} once loaded (the gate
// answers 503 before).
func (s *Server) handleLlamaHealth(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", []byte(`{"status":"ok"}`))
}

// llamaNCtxTrain is the model's training context reported as n_ctx_train.
func (s *Server) llamaNCtxTrain() int { return max(s.cfg.ContextLength, 4096) }

// handleLlamaModels serves /v1/models: an Ollama-style "models" list, then
// the OpenAI list whose one card has meta.n_ctx (per slot) and no
// max_model_len.
func (s *Server) handleLlamaModels(w http.ResponseWriter, r *http.Request) {
	m := s.cfg.Model
	card := []kv{
		{"id", m}, {"aliases", []string{m}}, {"tags", []string{}}, {"object", "model"},
		{"created", time.Now().Unix()}, {"owned_by", "llamacpp"},
		{"meta", orderedJSON([]kv{
			{"vocab_type", 2}, {"n_vocab", VocabSize}, {"n_ctx", s.cfg.ContextLength},
			{"n_ctx_train", s.llamaNCtxTrain()}, {"n_embd", 1024}, {"n_params", 1000000},
			{"size", 2000000}, {"ftype", "F16"},
		})},
	}
	if !s.cfg.Unmarked {
		card = append(card, kv{"gendex_simulator", true})
	}
	ollama := orderedJSON([]kv{
		{"name", m}, {"model", m}, {"modified_at", ""}, {"size", ""}, {"digest", ""}, {"type", "model"},
		{"description", ""}, {"tags", []string{""}}, {"capabilities", []string{"completion"}}, {"parameters", ""},
		{"details", orderedJSON([]kv{{"parent_model", ""}, {"format", "gguf"}, {"family", ""},
			{"families", []string{""}}, {"parameter_size", ""}, {"quantization_level", ""}})},
	})
	body := orderedJSON([]kv{
		{"models", append(append([]byte{'['}, ollama...), ']')},
		{"object", "list"},
		{"data", append(append([]byte{'['}, orderedJSON(card)...), ']')},
	})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", body)
}

// llamaDefaults are llama-server's sampling defaults.
var llamaDefaults = map[string]float64{
	"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
	"frequency_penalty": 0, "presence_penalty": 0, "repeat_penalty": 1.0,
}

// handleLlamaProps serves /props: the slot context and default settings.
func (s *Server) handleLlamaProps(w http.ResponseWriter, r *http.Request) {
	params := []kv{{"seed", 4294967295}}
	for _, k := range []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"} {
		params = append(params, kv{k, llamaDefaults[k]})
	}
	params = append(params, kv{"n_predict", -1})
	body := orderedJSON([]kv{
		{"default_generation_settings", orderedJSON([]kv{{"params", orderedJSON(params)}, {"n_ctx", s.cfg.ContextLength}})},
		{"total_slots", s.cfg.Slots}, {"model_alias", s.cfg.Model}, {"model_path", "/models/" + s.cfg.Model},
		{"endpoint_slots", false}, {"endpoint_props", false}, {"endpoint_metrics", s.cfg.EnableMetrics},
		{"build_info", llamaBuild}, {"is_sleeping", false},
	})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", body)
}

// llamaRequest is a llama.cpp generation request after parsing: the prompt
// ids and the sampling fields it reads.
type llamaRequest struct {
	body   map[string]json.RawMessage
	prompt []int
	sp     map[string]json.RawMessage
	salt   uint64
	text   string // the prompt as text, for /completion's "prompt"
}

// llamaSampling reads the sampling fields llama-server reads (with its
// defaults; a value of the wrong type falls back to the default, as
// json_value does) into the engine's sampling map and the output salt.
// maxKeys are the names of the token limit, in precedence order.
func llamaSampling(m map[string]json.RawMessage, maxKeys ...string) (map[string]json.RawMessage, uint64) {
	read := map[string]json.RawMessage{}
	for k, def := range llamaDefaults {
		v := m[k]
		if jsonKind(v) != "number" {
			v = rawNum(def)
		}
		read[k] = v
	}
	sp := map[string]json.RawMessage{"max_new_tokens": json.RawMessage("null")}
	for _, k := range maxKeys {
		if n, ok := asInt(m[k]); ok {
			if n >= 0 {
				sp["max_new_tokens"] = json.RawMessage(strconv.Itoa(n))
			}
			break
		}
	}
	if t, _ := parseNum(read["temperature"]); t.f <= 0 {
		sp["temperature"] = json.RawMessage("0")
	}
	if k, _ := asInt(read["top_k"]); k == 1 {
		sp["temperature"] = json.RawMessage("0")
	}
	if seed, ok := asInt(m["seed"]); ok && seed >= 0 && seed != 0xFFFFFFFF {
		sp["sampling_seed"] = json.RawMessage(strconv.Itoa(seed))
	}
	if b, ok := asBool(m["ignore_eos"]); ok && jsonKind(m["ignore_eos"]) == "bool" {
		sp["ignore_eos"] = json.RawMessage(strconv.FormatBool(b))
	}
	if list, _, ok := asStrings(m["stop"]); ok {
		sp["stop"] = marshal(list)
	}
	return sp, samplingSalt(read)
}

// llamaPrompt tokenizes a completion prompt as tokenize_input_prompts does
// for one prompt: a string (BOS added, special tokens parsed), or a list
// of token ids and strings. A list of prompts is a batch, which the
// simulator refuses.
func llamaPrompt(raw json.RawMessage) ([]int, string, string) {
	if s, ok := asString(raw); ok {
		return Encode(s, true), s, ""
	}
	a, ok := asArray(raw)
	if !ok {
		return nil, "", "\"prompt\" must be a string, a list of tokens, or a list of prompts"
	}
	if len(a) == 0 {
		return nil, "", "empty prompt"
	}
	allStrings := true
	for _, e := range a {
		k := jsonKind(e)
		if k == "array" || k == "object" {
			return nil, "", "sim: batch requests are not simulated (gendex sends one prompt per request)"
		}
		allStrings = allStrings && k == "string"
	}
	if allStrings && len(a) > 1 {
		return nil, "", "sim: batch requests are not simulated (gendex sends one prompt per request)"
	}
	var ids []int
	if allStrings {
		ids = append(ids, BOSID)
	}
	for _, e := range a {
		if str, ok := asString(e); ok {
			ids = appendEncoded(ids, str)
			continue
		}
		id, ok := asInt(e)
		if !ok {
			return nil, "", "invalid token id"
		}
		ids = append(ids, id)
	}
	return ids, Decode(ids, false), ""
}

// llamaCheck applies llama.cpp's checks to a parsed prompt, answering the
// request when one fails: a token id out of the vocabulary, a prompt that
// does not fit the slot's context, then the injected parse fault.
func (s *Server) llamaCheck(w http.ResponseWriter, g *genRequest, prompt []int) bool {
	for _, id := range prompt {
		if id < 0 || id >= VocabSize {
			llamaInvalid(w, fmt.Sprintf("invalid token id %d (vocab size %d)", id, VocabSize))
			g.end(outError)
			return false
		}
	}
	if n, c := len(prompt), s.cfg.ContextLength; n >= c {
		writeLlamaError(w, http.StatusBadRequest, "exceed_context_size_error",
			fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", n, c),
			kv{"n_prompt_tokens", n}, kv{"n_ctx", c})
		g.end(outError)
		return false
	}
	return !g.parseFault()
}

// runLlama builds and runs the item of a checked request. It returns nil
// when it has answered (or ended) the request.
func (s *Server) runLlama(w http.ResponseWriter, r *http.Request, g *genRequest, req *llamaRequest) *item {
	it, err := s.buildFlavorItem(g, req.prompt, req.sp, req.salt)
	if err != nil {
		llamaInvalid(w, err.msg)
		g.end(outError)
		return nil
	}
	if !s.runItem(r.Context(), it) {
		s.reqs.remove(it)
		g.finishItem(it, false)
		return nil
	}
	s.reqs.remove(it)
	return it
}

// llamaFinish is an item's OpenAI finish_reason as llama.cpp gives it.
func llamaFinish(it *item) string {
	if it.finish.kind == finishLength {
		return "length"
	}
	return "stop"
}

// llamaTimings is the timings object of an answer.
func (s *Server) llamaTimings(it *item) []byte {
	pms := perToken(len(it.prompt), s.cfg.PrefillTokensPerSec).Seconds() * 1000
	gms := perToken(it.produced, s.cfg.DecodeTokensPerSec).Seconds() * 1000
	per := func(ms float64, n int) (float64, float64) {
		if ms <= 0 || n <= 0 {
			return 0, 0
		}
		return ms / float64(n), float64(n) / ms * 1000
	}
	ppt, pps := per(pms, len(it.prompt))
	gpt, gps := per(gms, it.produced)
	return orderedJSON([]kv{
		{"cache_n", 0}, {"prompt_n", len(it.prompt)}, {"prompt_ms", pms}, {"prompt_per_token_ms", ppt},
		{"prompt_per_second", pps}, {"predicted_n", it.produced}, {"predicted_ms", gms},
		{"predicted_per_token_ms", gpt}, {"predicted_per_second", gps},
	})
}

// llamaUsage is an OpenAI usage object as llama.cpp writes it.
func llamaUsage(it *item) []byte {
	return orderedJSON([]kv{
		{"completion_tokens", it.produced}, {"prompt_tokens", len(it.prompt)},
		{"total_tokens", it.produced + len(it.prompt)},
		{"prompt_tokens_details", orderedJSON([]kv{{"cached_tokens", 0}})},
	})
}

// beginLlama starts a generation request and reads its body as
// llama.cpp does; on nil, the answer is written and the request ended.
func (s *Server) beginLlama(w http.ResponseWriter, r *http.Request) (*genRequest, map[string]json.RawMessage) {
	g := s.beginGeneration(w, r)
	if g == nil {
		return nil, nil
	}
	m, ok := parseLlamaBody(w, g.body)
	if !ok {
		g.end(outError)
		return nil, nil
	}
	return g, m
}

// handleLlamaCompletion serves /completion (llama.cpp's own answer) and
// /v1/completions (the OpenAI one).
func (s *Server) handleLlamaCompletion(w http.ResponseWriter, r *http.Request) {
	g, m := s.beginLlama(w, r)
	if g == nil {
		return
	}
	raw, has := m["prompt"]
	if !has {
		llamaInvalid(w, "[json.exception.out_of_range.403] key 'prompt' not found")
		g.end(outError)
		return
	}
	prompt, text, perr := llamaPrompt(raw)
	if perr != "" {
		llamaInvalid(w, perr)
		g.end(outError)
		return
	}
	if !s.llamaCheck(w, g, prompt) {
		return
	}
	sp, salt := llamaSampling(m, "n_predict", "max_tokens")
	it := s.runLlama(w, r, g, &llamaRequest{body: m, prompt: prompt, sp: sp, salt: salt, text: text})
	if it == nil {
		return
	}
	content := it.finalText()
	if r.URL.Path == "/v1/completions" {
		choice := orderedJSON([]kv{{"text", content}, {"index", 0}, {"logprobs", nil}, {"finish_reason", llamaFinish(it)}})
		writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{
			{"choices", append(append([]byte{'['}, choice...), ']')},
			{"created", time.Now().Unix()}, {"model", s.cfg.Model}, {"system_fingerprint", llamaBuild},
			{"object", "text_completion"}, {"usage", llamaUsage(it)}, {"id", "cmpl-" + it.rid},
			{"timings", s.llamaTimings(it)},
		}))
		g.finishItem(it, true)
		return
	}
	tokens := []int{}
	if b, ok := asBool(m["return_tokens"]); ok && b {
		tokens = it.plan.ids[:it.produced:it.produced]
	}
	stopType, word := "eos", ""
	switch it.finish.kind {
	case finishLength:
		stopType = "limit"
	case finishStopString:
		stopType, word = "word", it.finish.matchedStr
	}
	settings := []kv{{"n_predict", -1}}
	if n, ok := asInt(sp["max_new_tokens"]); ok {
		settings[0].v = n
	}
	for _, k := range []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty"} {
		if v := m[k]; jsonKind(v) == "number" {
			settings = append(settings, kv{k, v})
		} else {
			settings = append(settings, kv{k, llamaDefaults[k]})
		}
	}
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{
		{"index", 0}, {"content", content}, {"tokens", tokens}, {"id_slot", 0}, {"stop", true},
		{"model", s.cfg.Model}, {"tokens_predicted", it.produced}, {"tokens_evaluated", len(it.prompt)},
		{"generation_settings", orderedJSON(settings)}, {"prompt", text},
		{"has_new_line", strings.Contains(content, "\n")}, {"truncated", false},
		{"stop_type", stopType}, {"stopping_word", word}, {"tokens_cached", 0},
		{"timings", s.llamaTimings(it)},
	}))
	g.finishItem(it, true)
}

// llamaMessages parses chat messages as oaicompat_chat_params_parse does.
func llamaMessages(m map[string]json.RawMessage) ([]chatMessage, string) {
	raw, ok := m["messages"]
	if !ok {
		return nil, "'messages' is required"
	}
	list, ok := asArray(raw)
	if !ok {
		return nil, "Expected 'messages' to be an array"
	}
	msgs := make([]chatMessage, 0, len(list))
	for _, e := range list {
		mm, ok := asObject(e)
		if !ok {
			return nil, "Expected 'message' to be an object"
		}
		role, ok := asString(mm["role"])
		if !ok {
			return nil, "Missing 'role' in message"
		}
		if _, known := roleTokens[role]; !known {
			return nil, "Unsupported message role: " + role
		}
		var content string
		switch c := mm["content"]; jsonKind(c) {
		case "", "null":
		case "string":
			content, _ = asString(c)
		case "array":
			parts, _ := asArray(c)
			var b strings.Builder
			for _, p := range parts {
				pm, _ := asObject(p)
				if t, _ := asString(pm["type"]); t == "text" {
					str, _ := asString(pm["text"])
					b.WriteString(str)
				}
			}
			content = b.String()
		default:
			return nil, "Invalid 'content' type"
		}
		msgs = append(msgs, chatMessage{role: role, content: content})
	}
	return msgs, ""
}

// handleLlamaChat serves /v1/chat/completions: the messages through the
// chat template (SGLang's input_ids extension is not read).
func (s *Server) handleLlamaChat(w http.ResponseWriter, r *http.Request) {
	g, m := s.beginLlama(w, r)
	if g == nil {
		return
	}
	msgs, merr := llamaMessages(m)
	if merr != "" {
		llamaInvalid(w, merr)
		g.end(outError)
		return
	}
	prompt := s.chatPrompt(m, msgs)
	if !s.llamaCheck(w, g, prompt) {
		return
	}
	sp, salt := llamaSampling(m, "n_predict", "max_completion_tokens", "max_tokens")
	it := s.runLlama(w, r, g, &llamaRequest{body: m, prompt: prompt, sp: sp, salt: salt})
	if it == nil {
		return
	}
	text := it.finalText()
	msg := []kv{{"role", "assistant"}, {"content", text}}
	if s.cfg.ReasoningParser {
		if rtext, content := splitReasoning(text); rtext != "" {
			msg = []kv{{"role", "assistant"}, {"reasoning_content", rtext}, {"content", content}}
		}
	}
	choice := orderedJSON([]kv{{"finish_reason", llamaFinish(it)}, {"index", 0}, {"message", orderedJSON(msg)}})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{
		{"choices", append(append([]byte{'['}, choice...), ']')},
		{"created", time.Now().Unix()}, {"model", s.cfg.Model}, {"system_fingerprint", llamaBuild},
		{"object", "chat.completion"}, {"usage", llamaUsage(it)}, {"id", "chatcmpl-" + it.rid},
		{"timings", s.llamaTimings(it)},
	}))
	g.finishItem(it, true)
}

// encodeNoSpecial tokenizes text without parsing special token names:
// every byte is a byte token.
func encodeNoSpecial(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = ByteBase + int(text[i])
	}
	return ids
}

// handleLlamaTokenize serves /tokenize {content, add_special (false),
// parse_special (true), with_pieces (false)}; without content it answers
// {"tokens":[]}.
func (s *Server) handleLlamaTokenize(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	var ids []int
	if raw, has := m["content"]; has {
		boolOr := func(k string, def bool) bool {
			if b, ok := asBool(m[k]); ok && jsonKind(m[k]) == "bool" {
				return b
			}
			return def
		}
		addSpecial, parseSpecial := boolOr("add_special", false), boolOr("parse_special", true)
		enc := func(str string) []int {
			if parseSpecial {
				return appendEncoded(nil, str)
			}
			return encodeNoSpecial(str)
		}
		if addSpecial {
			ids = append(ids, BOSID)
		}
		if str, ok := asString(raw); ok {
			ids = append(ids, enc(str)...)
		} else if a, ok := asArray(raw); ok {
			for _, e := range a {
				if id, ok := asInt(e); ok {
					ids = append(ids, id)
				} else if str, ok := asString(e); ok {
					ids = append(ids, enc(str)...)
				}
			}
		}
		if boolOr("with_pieces", false) {
			pieces := make([][]byte, len(ids))
			for i, id := range ids {
				p := Decode([]int{id}, false)
				var pj any = p
				if !utf8.ValidString(p) {
					bs := make([]int, len(p))
					for j := 0; j < len(p); j++ {
						bs[j] = int(p[j])
					}
					pj = bs
				}
				pieces[i] = orderedJSON([]kv{{"id", id}, {"piece", pj}})
			}
			writeRaw(w, http.StatusOK, "application/json; charset=utf-8",
				orderedJSON([]kv{{"tokens", append(append([]byte{'['}, bytes.Join(pieces, []byte{','})...), ']')}}))
			return
		}
	}
	if ids == nil {
		ids = []int{}
	}
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{{"tokens", ids}}))
}

// handleLlamaDetokenize serves /detokenize {tokens} -> {content}.
func (s *Server) handleLlamaDetokenize(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	ids, _ := asInts(m["tokens"])
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{{"content", Decode(ids, false)}}))
}

// handleLlamaApplyTemplate serves /apply-template {messages} -> {prompt}:
// the chat template's text, what chat would tokenize.
func (s *Server) handleLlamaApplyTemplate(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	msgs, merr := llamaMessages(m)
	if merr != "" {
		llamaInvalid(w, merr)
		return
	}
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8",
		orderedJSON([]kv{{"prompt", Decode(s.chatPrompt(m, msgs), false)}}))
}

// llamaNum formats a metric value as a C++ ostream prints a double.
func llamaNum(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// handleLlamaMetrics serves /metrics: 501 without --metrics; else
// llama.cpp's counters and gauges, unlabelled, with the process start
// time in the Process-Start-Time-Unix header.
func (s *Server) handleLlamaMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.EnableMetrics {
		writeLlamaError(w, http.StatusNotImplemented, "not_supported_error",
			"This server does not support metrics endpoint. Start it with `--metrics`")
		return
	}
	st := s.Stats()
	f := s.fstats.snapshot()
	s.fstats.resetScrapeWindow()
	var b bytes.Buffer
	item := func(typ, name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n", name, help, name, typ, name, llamaNum(v))
	}
	rate := func(n int64, tps float64) float64 {
		if n == 0 {
			return 0
		}
		return tps
	}
	busy := 0.0
	if f.nDecode > 0 {
		busy = 1
	}
	item("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", float64(st.PromptTokens))
	item("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", 0)
	item("counter", "prompt_seconds_total", "Total time spent processing prompts", f.promptSeconds)
	item("counter", "tokens_predicted_total", "Number of generation tokens processed", float64(st.GeneratedTokens))
	item("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens", f.predictSeconds)
	item("counter", "n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", float64(f.nDecode))
	item("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)", float64(f.nTokensMax))
	item("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", float64(f.specDraftTokens))
	item("counter", "spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", float64(f.specAccepted))
	item("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", float64(f.specDrafts))
	item("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate(f.promptSinceScrape, s.cfg.PrefillTokensPerSec))
	item("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", rate(f.predictSinceScrape, s.cfg.DecodeTokensPerSec))
	item("gauge", "requests_processing", "Number of requests processing", float64(st.Running))
	item("gauge", "requests_deferred", "Number of requests deferred", float64(st.Queued))
	item("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", busy)
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(s.created, 10))
	writeRaw(w, http.StatusOK, "text/plain; version=0.0.4", b.Bytes())
}
