package client

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"time"
)

// GenerateRequest is one prompt for POST /generate. Exactly one of InputIDs
// (preferred: the server adds nothing) and Text (the server adds BOS and
// applies no chat template) must be set.
type GenerateRequest struct {
	InputIDs []int
	Text     string
	Sampling SamplingParams
}

// generateBody is the /generate request; its field order is the key order
// on the wire.
type generateBody struct {
	RID            string         `json:"rid"`
	InputIDs       []int          `json:"input_ids,omitempty"`
	Text           *string        `json:"text,omitempty"`
	SamplingParams SamplingParams `json:"sampling_params"`
	Stream         bool           `json:"stream"` // always false: gen reads whole answers
}

// metaInfo is the part of /generate's meta_info gendex keeps.
type metaInfo struct {
	specFields
	FinishReason     *finishReason `json:"finish_reason"`
	PromptTokens     *int          `json:"prompt_tokens"`
	CompletionTokens *int          `json:"completion_tokens"`
	CachedTokens     *int          `json:"cached_tokens"`
	ReasoningTokens  *int          `json:"reasoning_tokens"`
	E2ELatency       *float64      `json:"e2e_latency"`
}

// finishReason is /generate's finish_reason object: {type:"length",length},
// {type:"stop",matched:int|string} or {type:"abort",message,status_code?}.
type finishReason struct {
	Type       string          `json:"type"`
	Matched    json.RawMessage `json:"matched"`
	Message    string          `json:"message"`
	StatusCode *int            `json:"status_code"`
}

// generateResponse is one /generate answer.
type generateResponse struct {
	Text      *string  `json:"text"`
	OutputIDs []int    `json:"output_ids"`
	MetaInfo  metaInfo `json:"meta_info"`
}

// Generate sends req to POST /generate (non-streaming) under a fresh rid and
// returns the parsed answer. Only the sampling keys req sets are sent. A 200
// answer whose finish_reason is abort is returned as an *Error, never as a
// Result. All errors are *Error values; see Kind for what to do about them.
func (c *Client) Generate(ctx context.Context, req GenerateRequest) (*Result, error) {
	const op = "POST /generate"
	body, err := c.generateBody(op, req)
	if err != nil {
		return nil, err
	}
	var resp generateResponse
	start := time.Now()
	pendingIn(ctx).sent(body.RID)
	end, err := c.call(ctx, http.MethodPost, "/generate", body, &resp)
	if err != nil {
		return nil, err
	}
	return c.generateResult(op, body.RID, &resp, start, end)
}

func (c *Client) generateBody(op string, req GenerateRequest) (*generateBody, error) {
	switch {
	case len(req.InputIDs) > 0 && req.Text != "":
		return nil, c.requestError(op, "both input_ids and text are set")
	case len(req.InputIDs) == 0 && req.Text == "":
		return nil, c.requestError(op, "empty prompt: neither input_ids nor text is set")
	}
	b := &generateBody{RID: c.NewRID(), InputIDs: req.InputIDs, SamplingParams: req.Sampling}
	if len(req.InputIDs) == 0 {
		b.Text = &req.Text
	}
	return b, nil
}

// generateResult turns a final /generate answer into a Result.
func (c *Client) generateResult(op, rid string, resp *generateResponse, start, end time.Time) (*Result, error) {
	mi := &resp.MetaInfo
	r := &Result{
		API:              APIGenerate,
		RID:              rid,
		OutputIDs:        resp.OutputIDs,
		Text:             resp.Text,
		PromptTokens:     mi.PromptTokens,
		CompletionTokens: mi.CompletionTokens,
		CachedTokens:     mi.CachedTokens,
		ReasoningTokens:  mi.ReasoningTokens,
		Spec:             mi.spec(),
		E2ELatency:       latency(mi.E2ELatency, start, end),
		FinishedAt:       end.UTC(),
		Server:           c.server(),
		Model:            c.Model,
		Simulated:        c.Simulated,
		Provenance:       c.Provenance,
	}
	if fr := mi.FinishReason; fr != nil {
		if fr.Type == "abort" {
			return nil, c.abortError(op, fr.Message, fr.StatusCode)
		}
		r.FinishReason = fr.Type
		r.MatchedStop = parseMatched(fr.Matched)
	}
	return r, nil
}

// latency returns the server's e2e latency when given, else the measured
// one rounded to microseconds.
func latency(server *float64, start, end time.Time) float64 {
	if server != nil {
		return *server
	}
	return math.Round(end.Sub(start).Seconds()*1e6) / 1e6
}

// parseMatched decodes a matched stop: an int token id, a string, or nil.
func parseMatched(raw json.RawMessage) any {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return nil
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return nil
	}
	if i, err := n.Int64(); err == nil && i >= math.MinInt && i <= math.MaxInt {
		return int(i)
	}
	if f, err := n.Float64(); err == nil {
		return f
	}
	return nil
}

// ChatRequest is one conversation for POST /v1/chat/completions.
type ChatRequest struct {
	Messages []Message
	Sampling SamplingParams
	// Model overrides Client.Model.
	Model string
	// ChatTemplateKwargs overrides Client.ChatTemplateKwargs.
	ChatTemplateKwargs map[string]any
	// Extra holds more body fields, such as "reasoning_effort" or
	// "separate_reasoning". It cannot replace the fields the client sets.
	Extra map[string]any
	// Tools are the tools the model may call (a wrapped list; nil: none),
	// sent with tool_choice "auto" (tools.go).
	Tools json.RawMessage
}

// openAIUsage is the usage object of the OpenAI-compatible endpoints.
// SGLang puts reasoning_tokens flat in usage; OpenAI and vLLM nest it.
type openAIUsage struct {
	PromptTokens        *int `json:"prompt_tokens"`
	CompletionTokens    *int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens *int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	ReasoningTokens         *int `json:"reasoning_tokens"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// openAIResponse covers chat and completions answers.
type openAIResponse struct {
	Choices []struct {
		Message *struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"` // vLLM's name for it
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		Text         *string         `json:"text"`
		TokenIDs     []int           `json:"token_ids"`        // vLLM, with return_token_ids
		PromptIDs    []int           `json:"prompt_token_ids"` // vLLM completions, per choice
		FinishReason *string         `json:"finish_reason"`
		MatchedStop  json.RawMessage `json:"matched_stop"`
		MetaInfo     *metaInfo       `json:"meta_info"` // with return_meta_info
	} `json:"choices"`
	Usage *openAIUsage `json:"usage"`
	// PromptIDs is vLLM's chat prompt_token_ids (with return_token_ids).
	PromptIDs []int `json:"prompt_token_ids"`
	// SGLExt is SGLang's extension object; spec fields are read from it
	// when a server puts them there.
	SGLExt *specFields `json:"sglext"`
}

// Chat sends req to POST /v1/chat/completions (non-streaming) under a fresh
// rid. The server applies the chat template. Sampling fields are mapped by
// OpenAIFields; only set ones are sent. reasoning_content stays separate
// from the content (Text). A finish_reason of "abort" is returned as an
// *Error.
func (c *Client) Chat(ctx context.Context, req ChatRequest) (*Result, error) {
	const op = "POST /v1/chat/completions"
	if len(req.Messages) == 0 {
		return nil, c.requestError(op, "no messages")
	}
	kwargs := req.ChatTemplateKwargs
	if kwargs == nil {
		kwargs = c.ChatTemplateKwargs
	}
	body := c.openAIBody(req.Model, req.Sampling, req.Extra)
	body["messages"] = req.Messages
	if kwargs != nil {
		body["chat_template_kwargs"] = kwargs
	}
	addTools(body, req.Tools)
	if req.Tools != nil {
		// The model's parallel calls, all of them: llama-server allows
		// them only when asked (SGLang and vLLM by default).
		body["parallel_tool_calls"] = true
	}
	res, err := c.openAI(ctx, op, "/v1/chat/completions", APIChat, body)
	if err != nil && req.Tools != nil {
		return nil, c.toolsRefused(err)
	}
	return res, err
}

// CompletionRequest is one prompt for POST /v1/completions. Exactly one of
// PromptIDs and Prompt must be set.
type CompletionRequest struct {
	Prompt    string
	PromptIDs []int
	Sampling  SamplingParams
	// Model overrides Client.Model.
	Model string
	// Extra holds more body fields; it cannot replace the fields the
	// client sets.
	Extra map[string]any
}

// Complete sends req to POST /v1/completions (non-streaming) under a fresh
// rid. Note that the server's default max_tokens there is 16.
func (c *Client) Complete(ctx context.Context, req CompletionRequest) (*Result, error) {
	const op = "POST /v1/completions"
	body := c.openAIBody(req.Model, req.Sampling, req.Extra)
	switch {
	case len(req.PromptIDs) > 0 && req.Prompt != "":
		return nil, c.requestError(op, "both prompt and prompt ids are set")
	case len(req.PromptIDs) > 0:
		body["prompt"] = req.PromptIDs
	case req.Prompt != "":
		body["prompt"] = req.Prompt
	default:
		return nil, c.requestError(op, "empty prompt")
	}
	return c.openAI(ctx, op, "/v1/completions", APICompletions, body)
}

// openAIBody starts a chat or completions body: extra, then the sampling
// fields, model, rid and stream:false on top.
func (c *Client) openAIBody(model string, p SamplingParams, extra map[string]any) map[string]any {
	body := make(map[string]any, len(extra)+16)
	maps.Copy(body, extra)
	fields, _ := p.FieldsFor(c.Flavor)
	maps.Copy(body, fields)
	if c.Flavor == FlavorVLLM {
		body["return_token_ids"] = true // the exact ids, as /generate gives them
	}
	if model == "" {
		model = c.Model
	}
	if model != "" {
		body["model"] = model
	}
	body["stream"] = false
	body["rid"] = c.NewRID()
	return body
}

func (c *Client) openAI(ctx context.Context, op, path string, api API, body map[string]any) (*Result, error) {
	var resp openAIResponse
	start := time.Now()
	pendingIn(ctx).sent(body["rid"].(string))
	end, err := c.call(ctx, http.MethodPost, path, body, &resp)
	if err != nil {
		return nil, err
	}
	if len(resp.Choices) == 0 {
		return nil, &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: op,
			Message: "response has no choices"}
	}
	ch := &resp.Choices[0]
	r := &Result{
		API:        api,
		RID:        body["rid"].(string),
		Text:       ch.Text,
		FinishedAt: end.UTC(),
		Server:     c.server(),
		Model:      c.Model,
		Simulated:  c.Simulated,
		Provenance: c.Provenance,
	}
	if ch.Message != nil {
		r.Text = ch.Message.Content
		r.ReasoningContent = ch.Message.ReasoningContent
		if r.ReasoningContent == nil {
			r.ReasoningContent = ch.Message.Reasoning
		}
		if err := c.readToolCalls(op, r, ch.Message.ToolCalls); err != nil {
			return nil, err
		}
	}
	if ch.TokenIDs != nil {
		r.OutputIDs = ch.TokenIDs
		r.PromptIDs = ch.PromptIDs
		if r.PromptIDs == nil {
			r.PromptIDs = resp.PromptIDs
		}
	}
	if ch.FinishReason != nil {
		r.FinishReason = *ch.FinishReason
	}
	if r.FinishReason == "abort" {
		if ch.MetaInfo != nil && ch.MetaInfo.FinishReason != nil {
			fr := ch.MetaInfo.FinishReason
			return nil, c.abortError(op, fr.Message, fr.StatusCode)
		}
		return nil, c.abortError(op, "", nil)
	}
	r.MatchedStop = parseMatched(ch.MatchedStop)
	var serverLatency *float64
	if ch.MetaInfo != nil {
		serverLatency = ch.MetaInfo.E2ELatency
		r.Spec = ch.MetaInfo.spec()
	}
	if r.Spec == nil {
		r.Spec = resp.SGLExt.spec()
	}
	r.E2ELatency = latency(serverLatency, start, end)
	if u := resp.Usage; u != nil {
		r.PromptTokens = u.PromptTokens
		r.CompletionTokens = u.CompletionTokens
		if u.PromptTokensDetails != nil {
			r.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		r.ReasoningTokens = u.ReasoningTokens
		if r.ReasoningTokens == nil && u.CompletionTokensDetails != nil {
			r.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
		}
	}
	return r, nil
}
