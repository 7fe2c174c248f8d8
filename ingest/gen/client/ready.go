package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strings"
	"time"
)

// ReadyState is what a readiness probe found.
type ReadyState int

const (
	// StateRefused: the TCP connection was refused. SGLang binds its port
	// only after the weights are loaded, so the model is still loading.
	StateRefused ReadyState = iota
	// StateWarmingUp: /health answered 503; the server runs its warmup
	// request (or is shutting down).
	StateWarmingUp
	// StateUnavailable: any other temporary failure (reset, timeout, DNS,
	// another 5xx, 429).
	StateUnavailable
	// StateReady: /health answered 2xx.
	StateReady
)

// String describes s for a progress line.
func (s ReadyState) String() string {
	switch s {
	case StateRefused:
		return "connection refused (model loading)"
	case StateWarmingUp:
		return "warming up (503)"
	case StateUnavailable:
		return "unavailable"
	case StateReady:
		return "ready"
	}
	return fmt.Sprintf("ReadyState(%d)", int(s))
}

// Readiness is the outcome of one readiness probe.
type Readiness struct {
	State   ReadyState
	Elapsed time.Duration // since WaitReady started
	Status  int           // HTTP status of the probe, 0 when none arrived
	Err     error         // the probe's error; nil when ready
}

// healthProbeTimeout bounds one /health probe. SGLang's /health runs a
// one-token generation and waits up to 20 s for it.
const healthProbeTimeout = 30 * time.Second

// WaitReady polls GET /health every PollInterval until the server answers
// 2xx, and calls report (if non-nil) after every probe so the caller can show
// the state and a countdown. Connection refused, 503 and other transient
// failures mean "not yet". It returns nil once ready; an *Error of Kind Auth
// at once for 401/403; an *Error of Kind Setup at once for 404 or 405 (no
// /health: not a server's root URL); Permanent for other 4xx; and, when ctx ends first, an error that wraps
// ctx.Err() and names the last state seen.
func (c *Client) WaitReady(ctx context.Context, report func(Readiness)) error {
	start := time.Now()
	interval := c.PollInterval
	if interval <= 0 {
		interval = time.Second
	}
	var last *Readiness
	for {
		r, err := c.probe(ctx)
		if r.State != StateReady && ctx.Err() != nil {
			return c.notReady(start, last, ctx.Err())
		}
		r.Elapsed = time.Since(start)
		if report != nil {
			report(r)
		}
		if err != nil {
			return err
		}
		if r.State == StateReady {
			return nil
		}
		last = &r
		select {
		case <-ctx.Done():
			return c.notReady(start, last, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func (c *Client) notReady(start time.Time, last *Readiness, cause error) error {
	state := "no answer"
	if last != nil {
		state = last.State.String()
		if last.Err != nil && last.State != StateWarmingUp {
			state += ": " + last.Err.Error()
		}
	}
	return fmt.Errorf("wait ready: server %s not ready after %s (last: %s): %w",
		c.server(), time.Since(start).Round(time.Second), state, cause)
}

// probe sends one GET /health. It returns a non-nil error only when waiting
// longer cannot help.
func (c *Client) probe(ctx context.Context) (Readiness, error) {
	pctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()
	_, err := c.call(pctx, http.MethodGet, "/health", nil, nil)
	if err == nil {
		return Readiness{State: StateReady, Status: http.StatusOK}, nil
	}
	r := Readiness{State: StateUnavailable, Err: err}
	var e *Error
	if !errors.As(err, &e) {
		return r, err
	}
	r.Status = e.Status
	var dns *net.DNSError
	switch {
	case e.Kind == Auth:
		return r, err
	case e.Status == http.StatusServiceUnavailable:
		r.State = StateWarmingUp
	case e.Status == 0 && isRefused(e.Err):
		r.State = StateRefused
	case e.Status == 0 && (e.Kind == Transient || errors.As(e.Err, &dns)):
		// keep waiting: reset, timeout, a name that does not resolve yet
	case e.Kind == Transient:
		// 5xx, 408, 429
	default:
		return r, err
	}
	return r, nil
}

// Health sends one GET /health and returns nil when it answers 2xx within
// healthProbeTimeout (SGLang's /health runs a one-token generation).
func (c *Client) Health(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()
	_, err := c.call(pctx, http.MethodGet, "/health", nil, nil)
	return err
}

// ModelInfo is what GET /v1/models says of the model a client asks for.
type ModelInfo struct {
	ID          string // served model name
	MaxModelLen int    // effective context length; 0 when not reported
	// Simulated: the entry says the server is gendex's simulator
	// ("gendex_simulator": true, a field no other server sends).
	Simulated bool
	// Flavor is the server software, from "owned_by".
	Flavor Flavor
	// Models lists every id the server serves (LoRA adapters included).
	Models []string
	// Root is the entry's "root": the model's path (SGLang, vLLM), "" when
	// not reported.
	Root string
}

// modelCard is one entry of /v1/models, as SGLang, vLLM and llama.cpp
// write it.
type modelCard struct {
	ID          string  `json:"id"`
	OwnedBy     string  `json:"owned_by"`
	Parent      *string `json:"parent"`
	Root        string  `json:"root"`
	MaxModelLen *int    `json:"max_model_len"`
	Meta        *struct {
		NCtx *int `json:"n_ctx"`
	} `json:"meta"`
	Simulator bool `json:"gendex_simulator"`
}

// ServedModel reads GET /v1/models: the entry of Client.Model when it is
// set and listed, else the served model itself (the first entry without a
// parent: LoRA adapters are listed with their base model as parent, and
// SGLang lists them with max_model_len null), else the first entry. The
// context length is max_model_len (SGLang, vLLM), else meta.n_ctx
// (llama.cpp: the context of one slot).
func (c *Client) ServedModel(ctx context.Context) (ModelInfo, error) {
	const op = "GET /v1/models"
	var out struct {
		Data []modelCard `json:"data"`
	}
	if _, err := c.call(ctx, http.MethodGet, "/v1/models", nil, &out); err != nil {
		return ModelInfo{}, err
	}
	if len(out.Data) == 0 {
		return ModelInfo{}, &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: op,
			Message: "no model listed in /v1/models"}
	}
	pick := -1
	var ids []string
	for i, d := range out.Data {
		ids = append(ids, d.ID)
		if c.Model != "" && d.ID == c.Model && pick < 0 {
			pick = i
		}
	}
	for i, d := range out.Data {
		if pick < 0 && d.Parent == nil {
			pick = i
		}
	}
	if pick < 0 {
		pick = 0
	}
	d := out.Data[pick]
	info := ModelInfo{ID: d.ID, Simulated: d.Simulator, Flavor: flavorOf(d.OwnedBy), Models: ids, Root: d.Root}
	switch {
	case d.MaxModelLen != nil:
		info.MaxModelLen = *d.MaxModelLen
	case d.Meta != nil && d.Meta.NCtx != nil:
		info.MaxModelLen = *d.Meta.NCtx
	}
	return info, nil
}

// Message is one chat message; an assistant turn may carry tool calls,
// a tool turn the id and name of the call it answers (tools.go).
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// TokenizeMessages returns the prompt token ids SGLang's chat endpoint would
// use for messages (chat template applied, generation prompt added, no double
// BOS), via POST /v1/tokenize {"messages": ...}. ChatTemplateKwargs and
// Model are sent when set. When the server cannot do this (no
// /v1/tokenize, or one that wants "prompt") the error wraps
// ErrTokenizeUnsupported (test with errors.Is); the caller should then use
// Chat for the rest of the run.
func (c *Client) TokenizeMessages(ctx context.Context, messages []Message) ([]int, error) {
	return c.tokenizeMessages(ctx, messages, nil, Template{})
}

func (c *Client) tokenizeMessages(ctx context.Context, messages []Message, tools json.RawMessage, t Template) ([]int, error) {
	if len(messages) == 0 {
		return nil, c.requestError("POST /v1/tokenize", "no messages to tokenize")
	}
	body := map[string]any{"messages": messages}
	addTools(body, tools)
	kwargs := c.ChatTemplateKwargs
	if t.Kwargs != nil || t.Effort != "" {
		kwargs = maps.Clone(c.ChatTemplateKwargs)
		if kwargs == nil {
			kwargs = map[string]any{}
		}
		maps.Copy(kwargs, t.Kwargs)
		if t.Effort != "" && c.Flavor == FlavorVLLM {
			kwargs["reasoning_effort"] = t.Effort
		} else if t.Effort != "" {
			body["reasoning_effort"] = t.Effort
		}
	}
	if kwargs != nil {
		body["chat_template_kwargs"] = kwargs
	}
	switch c.Flavor {
	case FlavorVLLM: // /tokenize: the template adds the special tokens
		body["add_generation_prompt"], body["add_special_tokens"] = true, false
		return c.tokenize(ctx, "/tokenize", body, tokenizeUnsupported)
	case FlavorLlamaCpp: // no tokenize for messages (its /apply-template gives text)
		return nil, &Error{Kind: Permanent, Server: c.server(), Op: "POST /tokenize", Err: ErrTokenizeUnsupported,
			Message: "llama.cpp tokenizes text, not messages"}
	}
	return c.tokenize(ctx, "/v1/tokenize", body, tokenizeUnsupported)
}

// TokenizeText returns the ids /generate sees for text sent as "text"
// (add_special_tokens true: BOS and the like included), via POST
// /v1/tokenize {"prompt": text}. When the server has no /v1/tokenize (404
// or 405: SGLang older than v0.5.3.post1) the error wraps
// ErrTokenizeUnsupported.
func (c *Client) TokenizeText(ctx context.Context, text string) ([]int, error) {
	missing := func(e *Error) bool {
		return e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed
	}
	switch c.Flavor {
	case FlavorVLLM:
		return c.tokenize(ctx, "/tokenize", map[string]any{"prompt": text, "add_special_tokens": true}, missing)
	case FlavorLlamaCpp: // as its completion endpoints read a text prompt
		return c.tokenize(ctx, "/tokenize", map[string]any{"content": text, "add_special": true, "parse_special": true}, missing)
	}
	return c.tokenize(ctx, "/v1/tokenize", map[string]any{"prompt": text, "add_special_tokens": true}, missing)
}

// tokenize posts body (with Model when set) to /v1/tokenize and returns
// its flat "tokens". An error that unsupported says is the server's lack
// wraps ErrTokenizeUnsupported and is Permanent, not Setup: the endpoint is
// optional.
func (c *Client) tokenize(ctx context.Context, path string, body map[string]any, unsupported func(*Error) bool) ([]int, error) {
	if c.Model != "" && c.Flavor != FlavorLlamaCpp {
		body["model"] = c.Model
	}
	var out struct {
		Tokens json.RawMessage `json:"tokens"`
	}
	if _, err := c.call(ctx, http.MethodPost, path, body, &out); err != nil {
		var e *Error
		if errors.As(err, &e) && unsupported(e) {
			e.Err = ErrTokenizeUnsupported
			e.Kind = Permanent
		}
		return nil, err
	}
	var ids []int
	if err := json.Unmarshal(out.Tokens, &ids); err != nil || ids == nil {
		return nil, &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: "POST " + path,
			Message: "response has no flat \"tokens\" list"}
	}
	return ids, nil
}

// tokenizeUnsupported reports whether e says /v1/tokenize does not exist
// (404, 405) or does not take messages (400 or 422 asking for "prompt").
func tokenizeUnsupported(e *Error) bool {
	switch e.Status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return true
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return strings.Contains(strings.ToLower(e.Message), "prompt")
	}
	return false
}
