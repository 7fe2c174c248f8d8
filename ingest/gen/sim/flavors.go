package sim

// # Flavors: the servers the simulator speaks as
//
// Config.Flavor picks the server whose HTTP behaviour a client meets. The
// simulated model (tokenizer, chat template, outputs, timing, slots) is
// the same in every flavor; what changes is what a client can see: routes
// and their miss answers, request fields read or ignored, answer shapes,
// errors, and /metrics. Facts below were read from each project's public
// source (file, and commit where the copy read had one); "sim:" marks
// where the simulator simplifies.
//
// ## sglang (default; "" means sglang)
//
// As described in doc.go and ../shared/sglang-api.md (sgl-project/sglang
// 8905cbd4, with §14's later changes from tokenizer_manager.py 001067ff and
// observability/metrics_collector.py 016d8605):
//   - Routes /generate, /v1/chat/completions, /v1/completions,
//     /v1/tokenize, /health, /v1/models, /metrics (--enable-metrics),
//     /parse_function_call, /server_info and /get_server_info (see
//     tools_http.go); others 404 {"detail":"Not Found"}, wrong method 405.
//   - POST {} answers 400: /generate "Either text, input_ids or
//     input_embeds should be provided."; chat a validation error on the
//     missing messages; completions on the missing prompt; /v1/tokenize
//     "Exactly one of 'prompt' or 'messages' must be provided."
//   - /v1/models lists Config.LoRAAdapters before the base model, each
//     with max_model_len null and parent the base model (§14: a client
//     must pick the entry whose id is the served model).
//   - meta_info's speculative counts go by spec_num_correct_drafts,
//     spec_num_proposed_drafts, spec_correct_drafts_histogram and by the
//     old spec_accepted_drafts, spec_proposed_drafts, spec_accept_histogram
//     (§14, PR #24081).
//   - /metrics: prompt_tokens_total, generation_tokens_total,
//     num_requests_total, time_to_first_token_seconds and
//     e2e_request_latency_seconds carry is_streaming ("false": the
//     simulator does not stream); sglang:cached_tokens_total has
//     cache_source device, host and total (all 0: no prefix cache).
//
// ## vllm
//
// vllm-project/vllm, read through an index of mixed commits (see
// ../shared/vllm-api.md for each file's commit):
//   - Routes (FastAPI): GET /health (200, empty body), GET /v1/models,
//     POST /v1/completions, POST /v1/chat/completions, POST /tokenize,
//     POST /detokenize (serve/tokenize/api_router.py), POST
//     /inference/v1/generate (serve/disagg/api_router.py @063e5a89,
//     registered when the model supports "generate"), GET /metrics
//     (always mounted, serve/instrumentator/metrics.py). No /generate, no
//     /v1/tokenize: 404 {"detail":"Not Found"}; a wrong method 405.
//   - POST {} answers 400 {"error":{"message":…,"type":"Bad Request",
//     "param":null,"code":400}} (the RequestValidationError handler) on
//     every POST route: chat (messages required), completions ("Either
//     prompt or prompt_embeds must be provided and non-empty.",
//     completion/protocol.py), /tokenize, /detokenize (tokens required),
//     /inference/v1/generate (token_ids and sampling_params required,
//     serve/disagg/protocol.py @06408932).
//   - /v1/models cards (openai/models/serving.py, engine/protocol.py
//     ModelCard): owned_by "vllm", root, parent, max_model_len,
//     permission; LoRA cards after the base card, root the adapter path,
//     parent the base name, max_model_len null.
//   - An unknown "model" on every POST route: 404 {"error":{"message":"The
//     model `X` does not exist.","type":"NotFoundError","param":"model",
//     "code":404}} (engine/serving.py _check_model); absent model means
//     the served one.
//   - Chat has no pre-tokenized input: unknown fields such as SGLang's
//     input_ids are ignored (OpenAIBaseModel extra="allow"), so the
//     messages are answered as given. /v1/completions takes a token-id
//     prompt. return_token_ids adds choices[].token_ids and
//     choices[].prompt_token_ids on completions, choices[].token_ids and
//     a top-level prompt_token_ids on chat.
//   - /inference/v1/generate takes {token_ids, sampling_params, model,
//     request_id, stream} and answers {request_id, choices:[{index,
//     logprobs, finish_reason, token_ids}], prompt_logprobs,
//     kv_transfer_params}: no text, no usage. sampling_params.max_tokens
//     defaults to 16 (SamplingParams).
//   - Sampling read: max_tokens (completions default 16; chat default
//     null, the rest of the context), max_completion_tokens (chat, wins),
//     temperature, top_p, top_k, min_p, repetition_penalty,
//     presence_penalty, frequency_penalty, min_tokens, stop,
//     stop_token_ids, ignore_eos, skip_special_tokens,
//     include_stop_str_in_output, seed. Ignored: no_stop_trim, rid,
//     repeat_penalty, input_ids, return_prompt_token_ids,
//     return_meta_info.
//   - Errors: a prompt of max_model_len tokens or more: 400 "This model's
//     maximum context length is N tokens. However, your request has M
//     input tokens. Please reduce the length of the input messages."
//     (param input_tokens); prompt + max_tokens over the context: 400
//     "'max_tokens' or 'max_completion_tokens' is too large: …" (param
//     max_tokens).
//   - /metrics (v1/metrics/loggers.py): labels engine="0" and model_name;
//     vllm:num_requests_running, vllm:num_requests_waiting,
//     vllm:kv_cache_usage_perc, vllm:prefix_cache_queries_total,
//     vllm:prefix_cache_hits_total, vllm:prompt_tokens_total,
//     vllm:generation_tokens_total, vllm:request_success_total
//     {finished_reason}, and with speculative decoding
//     vllm:spec_decode_num_drafts_total, _num_draft_tokens_total,
//     _num_accepted_tokens_total (v1/spec_decode/metrics.py); and
//     process_start_time_seconds, from prometheus_client's process
//     collector: one API server (the default) serves the global registry,
//     which has it (only --api-server-count above 1 sets up the
//     multiprocess registry, without it: entrypoints/cli/serve.py).
//   - API key: only paths under /v1 and /inference; 401
//     {"error":"Unauthorized"}.
//
// ## llamacpp
//
// ggml-org/llama.cpp tools/server: server.cpp @00dd0816 (routes),
// server-http.cpp @00dd0816 (404, 401, loading 503), server-context.cpp
// @001d906a (handlers), server-task.cpp (answers, metrics), and the
// observed run of ../shared/sglang-api.md §13 (0253fb2):
//   - Routes (cpp-httplib): GET /health (and /v1/health), GET /v1/models
//     (and /models), POST /completion (and /completions), POST
//     /v1/completions, POST /v1/chat/completions (and /chat/completions),
//     POST /tokenize, POST /detokenize, POST /apply-template, GET
//     /metrics, GET /props. No /generate and no /v1/tokenize: 404
//     {"error":{"message":"File Not Found","type":"not_found_error",
//     "code":404}}, also for a known path with another method.
//   - While the model loads (Config.Warmup here), every route answers 503
//     {"error":{"message":"Loading model","type":"unavailable_error",
//     "code":503}}; then /health answers 200 {"status":"ok"}.
//   - POST {} answers: /v1/chat/completions and /apply-template 400
//     {"error":{"code":400,"message":"'messages' is required","type":
//     "invalid_request_error"}}; /completion and /v1/completions 400
//     {"error":{"code":400,"message":"[json.exception.out_of_range.403]
//     key 'prompt' not found","type":"invalid_request_error"}}; /tokenize
//     200 {"tokens":[]} (content is optional); /detokenize 200
//     {"content":""}. Nothing is generated for any of them.
//   - /v1/models: {"models":[…],"object":"list","data":[{"id":
//     "<file>.gguf","aliases","tags","object":"model","created",
//     "owned_by":"llamacpp","meta":{"vocab_type","n_vocab","n_ctx" (per
//     slot),"n_ctx_train","n_embd","n_params","size","ftype"}}]}: no
//     max_model_len. Here n_ctx is Config.ContextLength.
//   - The request's "model" is not checked: answers name the server's
//     model (task.params.oaicompat_model = meta->model_name).
//   - Chat ignores SGLang's input_ids and answers the messages through
//     the chat template; /v1/completions and /completion take a token-id
//     prompt. The OpenAI endpoints return no output ids; /completion
//     returns them as "tokens" only with "return_tokens": true (else
//     []), beside tokens_predicted and tokens_evaluated.
//   - /tokenize {content, add_special (false), parse_special (true),
//     with_pieces (false)} -> {"tokens":[ids]} or [{"id","piece"}];
//     /apply-template {messages} -> {"prompt": text}.
//   - Sampling read: n_predict / max_tokens (default -1: until the
//     context is full), temperature (0.8), top_k (40), top_p (0.95),
//     min_p (0.05), seed, ignore_eos, frequency_penalty,
//     presence_penalty, repeat_penalty, stop. Ignored:
//     repetition_penalty, min_tokens, stop_token_ids,
//     skip_special_tokens, no_stop_trim, rid.
//   - A prompt of n_ctx tokens or more: 400 {"error":{"code":400,
//     "message":"request (N tokens) exceeds the available context size
//     (C tokens), try increasing it","type":"exceed_context_size_error",
//     "n_prompt_tokens":N,"n_ctx":C}}. A prompt that fits but leaves less
//     room than asked is answered short with finish_reason "length".
//   - Config.ParseErrorRate answers HTTP 500 {"error":{"code":500,
//     "message":"Failed to parse input at pos 0","type":"server_error"}}.
//   - /metrics only with --metrics (Config.EnableMetrics), else 501
//     {"error":{"code":501,"message":"This server does not support
//     metrics endpoint. Start it with `--metrics`","type":
//     "not_supported_error"}}. Names (server_task_result_metrics::
//     to_metrics): counters llamacpp:prompt_tokens_total,
//     prompt_tokens_cached_total, prompt_seconds_total,
//     tokens_predicted_total, tokens_predicted_seconds_total,
//     n_decode_total, n_tokens_max, spec_decode_num_draft_tokens_total,
//     spec_decode_num_accepted_tokens_total, spec_decode_num_drafts_total;
//     gauges prompt_tokens_seconds, predicted_tokens_seconds,
//     requests_processing, requests_deferred, n_busy_slots_per_decode. No
//     labels; values printed as C++ streams print doubles (6 significant
//     digits). The 200 answer carries the header Process-Start-Time-Unix
//     (the server's start, unix seconds); no other answer does.
//   - API key: every path but /health, /v1/health, /models, /v1/models;
//     401 {"error":{"message":"Invalid API Key","type":
//     "authentication_error","code":401}}.
//
// sim: counters count the items the simulator answered (an injected
// ParseErrorRate or ErrorRate answer generates nothing and counts
// nothing), so a client's own counts can be compared with them.
// n_decode_total counts one decode per item and token (no batching), so
// n_busy_slots_per_decode is 1 once anything decoded.

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// flavorRouter is one flavor's routing: its route table, the gate every
// request passes first (nil: none), and its answers to a missing route and
// to a known route with another method.
type flavorRouter struct {
	table     map[string]route
	gate      func(w http.ResponseWriter, r *http.Request) bool
	notFound  func(w http.ResponseWriter)
	badMethod func(w http.ResponseWriter, rt route)
}

// flavorParts are the parts a flavor is given (New builds them): the
// flavor owns none of them. It reads cfg, asks eng for prompts and items,
// admits generation requests through faults, and routes its /metrics and
// tool routes to meters and tools; it never counts, draws faults or plans
// outputs itself.
type flavorParts struct {
	cfg     Config
	created int64 // unix seconds the server started, for /v1/models
	eng     *engine
	faults  *faults
	meters  *meters
	tools   *toolModel
}

// newFlavorRouter returns the router of Config.Flavor.
func newFlavorRouter(p flavorParts) flavorRouter {
	switch p.cfg.Flavor {
	case FlavorVLLM:
		return (&vllm{p}).routes()
	case FlavorLlamaCpp:
		return (&llamaCpp{p}).routes()
	}
	return (&sglang{p}).routes()
}

// fastAPINotFound is FastAPI's answer to a path no route serves (SGLang's
// and vLLM's).
func fastAPINotFound(w http.ResponseWriter) { writeDetail(w, http.StatusNotFound, "Not Found") }

// fastAPIBadMethod is FastAPI's answer to a known path with another method.
func fastAPIBadMethod(w http.ResponseWriter, rt route) {
	w.Header().Set("Allow", strings.Join(rt.methods, ", "))
	writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
}

// runFlavorItem builds and runs, on e, the item of a checked vLLM or
// llama.cpp request. On an error building it, it returns the error for
// the caller to answer in its flavor's shape (the request is not ended);
// when the client left before the end, it ends the request and returns
// nil, nil.
func runFlavorItem(e *engine, r *http.Request, g *genRequest, prompt []int, sp map[string]json.RawMessage, salt uint64) (*item, *apiError) {
	it, err := buildFlavorItem(e, g, prompt, sp, salt)
	if err != nil {
		return nil, err
	}
	ran := e.run(r.Context(), it)
	e.unregister(it)
	if !ran {
		g.finishItem(it, false)
		return nil, nil
	}
	return it, nil
}

// buildFlavorItem makes the item of a vLLM or llama.cpp request whose
// context checks the caller made: sp holds SGLang-named sampling keys the
// simulated engine understands (max_new_tokens, min_new_tokens, stop,
// stop_token_ids, ignore_eos, skip_special_tokens, no_stop_trim,
// sampling_seed, temperature only as 0 for greedy), maxNew null means
// until the context is full, and salt is samplingSalt of the fields the
// flavor read.
func buildFlavorItem(e *engine, g *genRequest, prompt []int, sp map[string]json.RawMessage, salt uint64) (*item, *apiError) {
	params, err := parseSamplingParams(sp, unlimited)
	if err != nil {
		return nil, err
	}
	params.salt = salt
	params.noToolCall, params.oneCall = g.noToolCall, g.oneCall
	budget := max(0, min(params.maxNewTokens, e.cfg.ContextLength-len(prompt)))
	params.minNewTokens = min(params.minNewTokens, budget)
	it := &item{rid: newRID(), prompt: prompt, sp: params, budget: budget, abortAt: -1, arrival: g.arrival}
	it.plan = e.plan(prompt, params, budget)
	g.applyFault(it)
	if err := e.register(it); err != nil {
		return nil, err
	}
	return it, nil
}

// isProbe reports whether body is an empty JSON object, the body a client
// sends to check a route exists without asking for anything. A probe never
// draws an injected fault.
func isProbe(body []byte) bool {
	return string(bytes.Join(bytes.Fields(body), nil)) == "{}"
}

// samplingSalt hashes the values of the sampling fields a flavor reads
// (after its defaults), so the simulated output depends on each field the
// server reads and on none it ignores. The SGLang flavor uses none: its
// outputs stay what they were.
func samplingSalt(read map[string]json.RawMessage) uint64 {
	keys := make([]string, 0, len(read))
	for k := range read {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := fnv.New64a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(bytes.TrimSpace(read[k]))
		h.Write([]byte{0})
	}
	return mix(h.Sum64() | 1)
}

// rawNum returns a JSON number's text for a float default.
func rawNum(f float64) json.RawMessage {
	return json.RawMessage(strconv.FormatFloat(f, 'g', -1, 64))
}

// readBody reads a request body; false if the client went away.
func readBody(r *http.Request) ([]byte, bool) {
	b, err := io.ReadAll(r.Body)
	return b, err == nil
}
