package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// llama.cpp's generation routes: /completion (and the OpenAI
// /v1/completions), /v1/chat/completions, their requests read as
// llama-server reads them and their answers in its shapes.

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

// checkPrompt applies llama.cpp's checks to a parsed prompt, answering the
// request when one fails: a token id out of the vocabulary, a prompt that
// does not fit the slot's context, then the injected parse fault.
func (l *llamaCpp) checkPrompt(w http.ResponseWriter, g *genRequest, prompt []int) bool {
	for _, id := range prompt {
		if id < 0 || id >= VocabSize {
			llamaInvalid(w, fmt.Sprintf("invalid token id %d (vocab size %d)", id, VocabSize))
			g.end(outError)
			return false
		}
	}
	if n, c := len(prompt), l.cfg.ContextLength; n >= c {
		writeLlamaError(w, http.StatusBadRequest, "exceed_context_size_error",
			fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", n, c),
			kv{"n_prompt_tokens", n}, kv{"n_ctx", c})
		g.end(outError)
		return false
	}
	return !g.parseFault()
}

// run builds and runs the item of a checked request. It returns nil
// when it has answered (or ended) the request.
func (l *llamaCpp) run(w http.ResponseWriter, r *http.Request, g *genRequest, req *llamaRequest) *item {
	it, err := runFlavorItem(l.eng, r, g, req.prompt, req.sp, req.salt)
	if err != nil {
		llamaInvalid(w, err.msg)
		g.end(outError)
	}
	return it
}

// llamaFinish is an item's OpenAI finish_reason as llama.cpp gives it.
func llamaFinish(it *item) string {
	if it.finish.kind == finishLength {
		return "length"
	}
	return "stop"
}

// timings is the timings object of an answer.
func (l *llamaCpp) timings(it *item) []byte {
	pms := perToken(len(it.prompt), l.cfg.PrefillTokensPerSec).Seconds() * 1000
	gms := perToken(it.produced, l.cfg.DecodeTokensPerSec).Seconds() * 1000
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

// begin starts a generation request and reads its body as
// llama.cpp does; on nil, the answer is written and the request ended.
func (l *llamaCpp) begin(w http.ResponseWriter, r *http.Request) (*genRequest, map[string]json.RawMessage) {
	return l.faults.admitWith(w, r, func(body []byte) map[string]json.RawMessage {
		m, _ := parseLlamaBody(w, body)
		return m
	})
}

// writeAnswer writes an OpenAI-compatible answer of it as
// llama-server does (its one choice, then created, model, fingerprint,
// object, usage, id and timings) and finishes the item.
func (l *llamaCpp) writeAnswer(w http.ResponseWriter, g *genRequest, it *item, idPrefix, object string, choice []byte) {
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{
		{"choices", jsonList(choice)},
		{"created", time.Now().Unix()}, {"model", l.cfg.Model}, {"system_fingerprint", llamaBuild},
		{"object", object}, {"usage", llamaUsage(it)}, {"id", idPrefix + it.rid},
		{"timings", l.timings(it)},
	}))
	g.finishItem(it, true)
}

// handleCompletion serves /completion (llama.cpp's own answer) and
// /v1/completions (the OpenAI one).
func (l *llamaCpp) handleCompletion(w http.ResponseWriter, r *http.Request) {
	g, m := l.begin(w, r)
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
	if !l.checkPrompt(w, g, prompt) {
		return
	}
	sp, salt := llamaSampling(m, "n_predict", "max_tokens")
	it := l.run(w, r, g, &llamaRequest{body: m, prompt: prompt, sp: sp, salt: salt, text: text})
	if it == nil {
		return
	}
	content := it.finalText()
	if r.URL.Path == "/v1/completions" {
		choice := orderedJSON([]kv{{"text", content}, {"index", 0}, {"logprobs", nil}, {"finish_reason", llamaFinish(it)}})
		l.writeAnswer(w, g, it, "cmpl-", "text_completion", choice)
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
		{"model", l.cfg.Model}, {"tokens_predicted", it.produced}, {"tokens_evaluated", len(it.prompt)},
		{"generation_settings", orderedJSON(settings)}, {"prompt", text},
		{"has_new_line", strings.Contains(content, "\n")}, {"truncated", false},
		{"stop_type", stopType}, {"stopping_word", word}, {"tokens_cached", 0},
		{"timings", l.timings(it)},
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

// handleChat serves /v1/chat/completions: the messages through the
// chat template (SGLang's input_ids extension is not read).
func (l *llamaCpp) handleChat(w http.ResponseWriter, r *http.Request) {
	g, m := l.begin(w, r)
	if g == nil {
		return
	}
	msgs, merr := llamaMessages(m)
	if merr != "" {
		llamaInvalid(w, merr)
		g.end(outError)
		return
	}
	tools, ok := l.chatTools(w, m, msgs)
	if !ok {
		g.end(outError)
		return
	}
	g.noToolCall = tools != nil && tools.choice == "none"
	// llama-server allows parallel calls only when asked (function-calling.md).
	g.oneCall = !truthy(m["parallel_tool_calls"])
	prompt := l.eng.chatPrompt(m, msgs)
	if !l.checkPrompt(w, g, prompt) {
		return
	}
	sp, salt := llamaSampling(m, "n_predict", "max_completion_tokens", "max_tokens")
	it := l.run(w, r, g, &llamaRequest{body: m, prompt: prompt, sp: sp, salt: salt})
	if it == nil {
		return
	}
	text := it.finalText()
	msg := []kv{{"role", "assistant"}, {"content", text}}
	if l.cfg.ReasoningParser {
		if rtext, content := splitReasoning(text); rtext != "" {
			msg = []kv{{"role", "assistant"}, {"reasoning_content", rtext}, {"content", content}}
		}
	}
	finish := llamaFinish(it)
	if tools.calling() {
		if normal, calls := parseCalls(formatQwen, llamaParser, msg[len(msg)-1].v.(string), tools.names); len(calls) > 0 {
			msg[len(msg)-1].v = normal
			msg = append(msg, kv{"tool_calls", llamaToolCalls(calls)})
			if finish == "stop" {
				finish = "tool_calls"
			}
		}
	}
	choice := orderedJSON([]kv{{"finish_reason", finish}, {"index", 0}, {"message", orderedJSON(msg)}})
	l.writeAnswer(w, g, it, "chatcmpl-", "chat.completion", choice)
}

// chatTools reads a chat request's tools and its messages' tool_calls
// with Config.ToolCalls (nil without), as llama-server does: without
// --jinja, tools or a tool_choice are a 500. On a refusal it answers and
// reports false.
func (l *llamaCpp) chatTools(w http.ResponseWriter, m map[string]json.RawMessage, msgs []chatMessage) (*toolRequest, bool) {
	if !l.cfg.ToolCalls {
		return nil, true
	}
	if l.cfg.NoJinja {
		msg := ""
		if a, ok := asArray(m["tools"]); ok && len(a) > 0 {
			msg = "tools param requires --jinja flag"
		} else if !isNull(m["tool_choice"]) {
			msg = "Unsupported param: tool_choice"
		}
		if msg != "" {
			writeLlamaError(w, http.StatusInternalServerError, "server_error", msg)
			return nil, false
		}
		return nil, true
	}
	tools, err := readTools(m)
	if err == nil {
		err = attachToolCalls(m["messages"], msgs)
	}
	if err != nil {
		writeLlamaError(w, err.status, "invalid_request_error", err.msg)
		return nil, false
	}
	return tools, true
}
