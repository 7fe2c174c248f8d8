/*
Package sim is an in-process HTTP simulator of an SGLang server, for dry runs
and tests of clients that talk to SGLang.

It serves the endpoints gendex gen calls, with the request and response
shapes, status codes and error messages of SGLang's own HTTP server
(README.md, "sim"): /generate, /v1/chat/completions, /v1/completions,
/v1/tokenize, /health, /v1/models, /parse_function_call, /server_info,
/abort_request (abort.go) and, with Config.EnableMetrics, /metrics.
It does not stream: a request with "stream": true gets a 400, since gen
reads whole answers. Nor does it batch: like gen, a request carries one
prompt (a text or one input_ids list; for /v1/completions one string or one
token-id list) and asks for one sample, so a list of prompts, input_ids
lists, sampling_params or rids, and n > 1, get a 400.

# The simulated model

The model has a small reversible tokenizer (see Encode, Decode and the token
id constants): every byte b of text is the token ByteBase+b, and a few special
tokens (BOS, EOS, chat-template markers, <think>) have ids below ByteBase.
A chat prompt is rendered as

	BOS {IMStart role content IMEnd}... IMStart Assistant

Outputs are readable English-like words, deterministic: the output of a
request is a pure function of its prompt ids, Config.Seed, and, unless the
request is greedy (temperature 0 or top_k 1), its sampling_seed. The
temperature value itself does not change the
text. Each output has a natural length of its own, drawn log-normal from the
prompt and seeds, whatever max_new_tokens is (lengths.go: a median of 64
tokens, and 256 more of thinking for a reasoning model): it ends with EOS
("stop") when that fits max_new_tokens, else runs into the limit ("length"),
about one in four at the default 128 and none in practice at 8192, and a
higher limit continues a cut output with the same text. EOS is included in
output_ids and completion_tokens but not in text, as in SGLang.

With Config.ReasoningParser the model is a reasoning model served with
--reasoning-parser: when the prompt ends with the assistant generation prompt,
the output starts with a <think>...</think> section, chat responses split it
into reasoning_content, and reasoning_tokens counts it. Its chat template
renders an assistant message before the last user message without its
reasoning (what precedes its last </think>), as Qwen3's template does, so a
conversation regenerated through /generate, whose text keeps the <think>
section, is prompted as through chat.

# Timing and load

Each generation item waits FIFO for one of Config.Slots decode slots, then
sleeps prompt/PrefillTokensPerSec plus completion/DecodeTokensPerSec
Queues grow without bound, as in SGLang by default. A client disconnect frees
the slot (on the SGLang flavor with Config.DisconnectCheck, at its next
look, as SGLang); /abort_request frees it at once.
Stats and OccupancySeries report load.

With Config.StepBase, StepPerReq or KVTokens (Config.Knee) the knee
scheduler (batcher, batch.go) runs instead: decode steps over a batch that
take StepBase + StepPerReq × batch, one token per item per step, so the
total throughput rises and then flattens; the batch is capped by Slots and
by a KV pool in tokens, past which SGLang queues and vLLM preempts the
newest item, which recomputes its prompt and output when readmitted.

# Speculative decoding and /metrics

With Config.SpecDraftTokens N the model decodes speculatively: each answer's
meta_info carries SGLang's spec fields (spec_verify_ct, spec_accept_length =
completion_tokens / spec_verify_ct, spec_accept_rate = accepted /
(spec_verify_ct × (N-1)), spec_num_correct_drafts, spec_num_proposed_drafts
and spec_correct_drafts_histogram, and their old names
spec_accepted_drafts, spec_proposed_drafts and spec_accept_histogram), deterministic per prompt; see spec.go.

/metrics (Config.EnableMetrics) has SGLang's scheduler gauges
(num_running_reqs, num_queue_reqs, num_used_tokens, token_usage,
gen_throughput, cache_hit_rate, spec_accept_length and spec_accept_rate with
speculative decoding, max_total_num_tokens, context_len) with the
scheduler's labels, and the tokenizer's counters (prompt_tokens_total,
generation_tokens_total, num_requests_total, num_aborted_requests_total,
cached_tokens_total by cache_source) with model_name and engine_type, the
first three and the time_to_first_token_seconds and
e2e_request_latency_seconds histograms also with is_streaming; see
meters.sglangPage (metrics_pages.go).

# Flavors

Config.Flavor makes the simulator speak as another server: FlavorSGLang
(the default, all of the above), FlavorVLLM (vLLM's OpenAI-compatible
server) or FlavorLlamaCpp (llama.cpp's llama-server). A flavor changes what
a client can see, never the simulated model: routes and the answer to a
missing one, what POST {} gets on each route, /v1/models cards, chat
ignoring SGLang's input_ids, which sampling fields are read (the output
depends on exactly those), context and model errors, and /metrics names.
flavors.go lists each flavor's facts with the source file (and commit)
they were read from. Each flavor is its own type in its own files (see
Parts below).

# Tool calls

With Config.ToolCalls the model calls tools: the template renders a
request's tools and tool_calls, and an answer to a prompt holding tools
calls one of them on some turns, in Qwen's or Kimi-K2's markup; each
flavor's chat endpoint parses the calls as its server does (SGLang with
Config.ToolCallParser, vLLM with EnableAutoToolChoice too, llama.cpp
unless NoJinja) or refuses the tools as it does, and the SGLang flavor
serves /parse_function_call and /server_info (which names the parser).
See tools.go and tools_http.go.

# Faults

Config can delay the bind (StartupDelay), answer 503 during a warmup
(Warmup), fail, reset or abort a deterministic fraction of generation
requests (ErrorRate, ResetRate, AbortRate, and ParseErrorRate with llama.cpp's
500 "Failed to parse input at pos 0", drawn from Seed and the request's
arrival number; a route probe, a body of {}, draws none), and crash the whole server after N completed requests
(CrashAfter).

# Parts

New builds the server from parts with one job each; each part is its own
type, holds only the parts it calls, and its doc comment says what it owns
and what it may not touch:

	Server       server.go     the owner: builds the parts, routes each request
	                           (crash check, flavor gate, path), exports the API
	sglang       sglang*.go    one type per flavor, built from flavorParts:
	vllm         vllm*.go      its routes, request checks and answer shapes;
	llamaCpp     llamacpp*.go  owns no state (flavors.go: facts, flavorParts)
	faults       faults.go     down and up (startup delay, warmup, crash) and
	                           the injected faults; admits generation requests
	engine       engine.go     the model and scheduler: prompts, planned
	                           outputs (model.go, lengths.go, spec.go,
	                           params.go, tokenizer.go), rids, decode slots
	                           (slots.go), the time an item takes
	batcher      batch.go      the knee scheduler: batched steps, the KV
	                           pool, SGLang's queue, vLLM's preemption
	toolModel    tools*.go     the tool-calling model: calls in answers, the
	                           tools a prompt renders, /parse_function_call
	meters       metrics*.go   counters, gauges and histograms (Stats),
	                           each flavor's /metrics, /server_info

Shared by every part: config.go (Config), request.go (reading a request
the same way in every flavor), errors.go (error shapes), jsonutil.go and
lax.go (JSON).

A generation request flows through them in one direction:

	Server.router -> flavor gate and handler -> faults.admit (count it
	through meters; warmup, CrashOn, the fault drawn) -> flavor checks ->
	engine (plan the output, run it in a slot; report to meters) ->
	flavor answer -> genRequest.end (count the outcome through meters;
	faults crashes after CrashAfter)

Info routes (/v1/models, tokenize, /health) go from the flavor to the
tokenizer, the engine's chat template, or faults (warmup); /metrics and
/server_info to meters; /parse_function_call to toolModel. No part
reaches the Server, and nothing is plugged in through package variables:
every part gets what it calls as New's arguments.
*/
package sim
