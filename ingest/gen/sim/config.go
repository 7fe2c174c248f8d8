package sim

import "time"

// Defaults applied to zero Config fields.
const (
	DefaultModel               = "sim-model"
	DefaultContextLength       = 32768
	DefaultSlots               = 128
	DefaultMaxNewTokensDefault = 128
)

// Config describes the simulated server. The zero value of every field means
// the documented default.
type Config struct {
	// Model is the served model name (--served-model-name), default
	// DefaultModel.
	Model string
	// Unmarked leaves the simulator's mark ("gendex_simulator": true) out
	// of /v1/models, so gen takes the server for a real one: tests of what
	// gen does with a real server use it.
	Unmarked bool
	// ContextLength is the model context length, default DefaultContextLength.
	// It is reported as /v1/models data[0].max_model_len and bounds prompts.
	ContextLength int
	// Slots is like --max-running-requests: how many generation items decode
	// at once (default DefaultSlots). Items beyond it queue, FIFO and without
	// bound, as SGLang never rejects for load by default.
	Slots int
	// PrefillTokensPerSec is the prefill speed of one item; 0 means instant.
	PrefillTokensPerSec float64
	// DecodeTokensPerSec is the decode speed of each running item; 0 means
	// instant.
	DecodeTokensPerSec float64
	// MaxNewTokensDefault is the /generate max_new_tokens used when the
	// request omits it, default DefaultMaxNewTokensDefault (128, as SGLang).
	MaxNewTokensDefault int
	// APIKey, if set, is required as "Authorization: Bearer <APIKey>" on
	// every endpoint except /health and /metrics; otherwise the answer is
	// 401 {"error":"Unauthorized"}.
	APIKey string
	// ReasoningParser simulates a reasoning model served with
	// --reasoning-parser: outputs after a generation prompt start with a
	// <think> section, chat splits it into reasoning_content and
	// reasoning_tokens counts it.
	ReasoningParser bool
	// EnableMetrics serves /metrics (--enable-metrics). Without it /metrics
	// is 404, as in SGLang.
	EnableMetrics bool
	// TokenizerMaxLength is the tokenizer model_max_length that /v1/tokenize
	// reports as max_model_len; 0 means the HF sentinel TokenizerMaxLength.
	TokenizerMaxLength int64

	// StartupDelay makes ListenAndServe bind its port only after this long,
	// so clients see connection refused, like SGLang loading weights.
	StartupDelay time.Duration
	// Warmup is how long after the server starts (see Server.Handler)
	// /health and the generation endpoints answer 503. /v1/models answers
	// 200 meanwhile.
	Warmup time.Duration
	// ErrorRate is the fraction of generation requests answered with an
	// injected 500 or 503.
	ErrorRate float64
	// ResetRate is the fraction of generation requests whose connection is
	// reset without a response.
	ResetRate float64
	// AbortRate is the fraction of generation requests whose items are
	// aborted part way: 200 with finish_reason type "abort".
	AbortRate float64
	// DisconnectCheck is how often the SGLang flavor looks whether a
	// request's client is still there (SGLang's
	// SGLANG_REQUEST_STATE_WAIT_TIMEOUT, 4 s): a request whose client left
	// runs on, holding its slot, until the next look. 0, the default, stops
	// it at once, as vLLM and llama.cpp do (they ignore this setting).
	// /abort_request stops a request at once either way (abort.go).
	DisconnectCheck time.Duration
	// CrashAfter, if positive, crashes the server once that many generation
	// requests have completed: the listener and every connection close.
	CrashAfter int
	// CrashOn, if set, crashes the server when a generation request whose
	// body contains it arrives (a text prompt or a chat message holding
	// this string): like a prompt that runs SGLang out of memory, the
	// request gets no answer and the listener and every connection close.
	CrashOn string
	// Seed makes outputs and injected faults reproducible.
	Seed int64

	// SpecDraftTokens, when 2 or more, simulates speculative decoding with
	// SGLang's --speculative-num-draft-tokens N: each answer's meta_info
	// carries spec_verify_ct, spec_accept_length, spec_accept_rate,
	// spec_accepted_drafts, spec_proposed_drafts and
	// spec_accept_histogram, computed as SGLang computes them (see spec),
	// and /metrics has sglang:spec_accept_length and
	// sglang:spec_accept_rate. 0 (or 1) means no speculative decoding.
	SpecDraftTokens int
	// MaxTotalTokens is the KV cache pool in tokens (SGLang's
	// max_total_num_tokens), the denominator of sglang:token_usage; 0 means
	// Slots × ContextLength, a pool that never binds (the simulator never
	// retracts or queues for KV space).
	MaxTotalTokens int

	// StepBase and StepPerReq make the knee scheduler's decode step take
	// StepBase + StepPerReq × (items in the batch): one item's tokens/s
	// fall as the batch grows, the total rises toward 1/StepPerReq and
	// flattens (batch.go). KVTokens, when positive, is a KV pool in tokens
	// that binds (and is MaxTotalTokens): SGLang queues past it, vLLM
	// preempts. Any of the three runs the knee scheduler (Knee); all zero,
	// the default, keeps the slot model above (Slots, DecodeTokensPerSec).
	StepBase, StepPerReq time.Duration
	KVTokens             int

	// Flavor is the server the simulator speaks as: "" or FlavorSGLang
	// (SGLang, the default), FlavorVLLM (vLLM's OpenAI-compatible server)
	// or FlavorLlamaCpp (llama.cpp's llama-server). Each flavor has its
	// own routes, answer shapes, errors, sampling fields and /metrics
	// names; see flavors.go. Under FlavorLlamaCpp, ContextLength is the
	// per-slot context (meta.n_ctx), and EnableMetrics is --metrics.
	Flavor string
	// LoRAAdapters names LoRA adapters the server has loaded: /v1/models
	// lists a card for each (max_model_len null, parent the base model),
	// SGLang before the base model's card, vLLM after it. llama.cpp lists
	// none.
	LoRAAdapters []string
	// ParseErrorRate is the fraction of well-formed generation requests
	// answered with llama.cpp's HTTP 500 {"error":{"code":500,"message":
	// "Failed to parse input at pos 0",...}} (what llama-server answers
	// when a model's output does not parse), before any token is
	// generated: for retry tests. It is drawn after ErrorRate, ResetRate
	// and AbortRate, from the same draw.
	ParseErrorRate float64

	// ToolCalls makes the model a tool-calling model (tools.go): the chat
	// template renders a request's tools and its assistant tool_calls, and
	// an answer to a prompt that holds tools calls one of them on some
	// turns, deterministically per prompt and seed. Without it tools are
	// ignored, as before.
	ToolCalls bool
	// ToolCallParser is the server's --tool-call-parser (SGLang, vLLM; see
	// SimulatedToolParsers): with it, the chat endpoint parses the model's
	// calls into tool_calls (vLLM also needs EnableAutoToolChoice); it
	// also picks the model's markup: Kimi-K2's for kimi_k2, else Qwen's.
	ToolCallParser string
	// EnableAutoToolChoice is vLLM's --enable-auto-tool-choice.
	EnableAutoToolChoice bool
	// NoJinja is llama-server's --no-jinja: requests with tools are
	// refused, as llama.cpp refuses them.
	NoJinja bool
}

// The flavors of Config.Flavor.
const (
	FlavorSGLang   = "sglang"
	FlavorVLLM     = "vllm"
	FlavorLlamaCpp = "llamacpp"
)

// Flavors lists the valid Config.Flavor values (besides "").
var Flavors = []string{FlavorSGLang, FlavorVLLM, FlavorLlamaCpp}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.Flavor == "" {
		c.Flavor = FlavorSGLang
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Flavor == FlavorLlamaCpp && c.Model == DefaultModel {
		// llama-server names its model after the GGUF file.
		c.Model = DefaultModel + ".gguf"
	}
	if c.ContextLength <= 0 {
		c.ContextLength = DefaultContextLength
	}
	if c.Slots <= 0 {
		c.Slots = DefaultSlots
	}
	if c.SpecDraftTokens < 2 {
		c.SpecDraftTokens = 0
	}
	if c.KVTokens > 0 {
		c.MaxTotalTokens = c.KVTokens
	}
	if c.MaxTotalTokens <= 0 {
		c.MaxTotalTokens = c.Slots * c.ContextLength
	}
	if c.MaxNewTokensDefault <= 0 {
		c.MaxNewTokensDefault = DefaultMaxNewTokensDefault
	}
	return c
}

// maxReqInputLen is SGLang's max_req_input_len: min(context-1, pool-1) - 5,
// the pool counted only when it binds (KVTokens).
func (c Config) maxReqInputLen() int {
	if c.KVTokens > 0 {
		return min(c.ContextLength-1, c.KVTokens-1) - 5
	}
	return c.ContextLength - 1 - 5
}

// Knee reports whether the knee scheduler (batch.go) runs: a step time
// that grows with the batch or a KV pool that binds.
func (c Config) Knee() bool { return c.StepBase > 0 || c.StepPerReq > 0 || c.KVTokens > 0 }
