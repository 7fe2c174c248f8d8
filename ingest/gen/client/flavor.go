package client

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"gendex/store"
)

// Flavor is the server software behind a URL, as its /v1/models says
// ("owned_by"). Routes, field names and facts differ between them:
//
//	                   SGLang               vLLM                       llama.cpp
//	/generate          yes (ids in, ids out) no                        no
//	output ids         /generate            return_token_ids: true     none on the OpenAI endpoints
//	tokenize           /v1/tokenize         /tokenize                  /tokenize {content} (text only here)
//	context length     max_model_len        max_model_len              meta.n_ctx (per slot)
//	chat input_ids     read (its extension)  ignored                    ignored
//	repetition penalty repetition_penalty   repetition_penalty         repeat_penalty
//	stop one request   /abort_request (rid) the connection closed      the connection closed
//
// (../shared/sglang-api.md sections 3, 4, 13 and 15, and the simulator's
// package doc, name the sources.) An unknown flavor is spoken to through the
// OpenAI API alone. The values and their names are store.Flavor's, the one
// enum of server flavors (kept with every /metrics sample too); this type
// adds what the client does on each.
type Flavor store.Flavor

// The flavors gendex knows.
const (
	FlavorUnknown  = Flavor(store.FlavorOther) // /v1/models names none of the others
	FlavorSGLang   = Flavor(store.FlavorSGLang)
	FlavorVLLM     = Flavor(store.FlavorVLLM)
	FlavorLlamaCpp = Flavor(store.FlavorLlamaCpp)
)

// String names the flavor for people (store.Flavor's name).
func (f Flavor) String() string { return store.Flavor(f).String() }

// flavorOf recognises a server by its /v1/models "owned_by".
func flavorOf(ownedBy string) Flavor { return Flavor(store.FlavorNamed(ownedBy)) }

// API is the API gen uses on this flavor when --api is auto: SGLang's
// /generate (ids in, ids out, for every prompt shape), else the OpenAI
// chat endpoint (token-id prompts go to /v1/completions as a token array,
// which every OpenAI-compatible server reads).
func (f Flavor) API() API {
	if f == FlavorSGLang {
		return APIGenerate
	}
	return APIChat
}

// ReturnsOutputIDs reports whether answers from api on this flavor carry
// the output token ids (what --export ids needs).
func (f Flavor) ReturnsOutputIDs(api API) bool {
	switch {
	case api == APIGenerate:
		return true // /generate is SGLang's, and returns them
	case f == FlavorVLLM:
		return true // return_token_ids
	}
	return false
}

// ReadsChatInputIDs reports whether the chat endpoint reads SGLang's
// "input_ids" extension; the others answer the messages instead.
func (f Flavor) ReadsChatInputIDs() bool { return f == FlavorSGLang }

// DropsFields reports whether FieldsFor leaves set fields out for f (so a
// caller need only ask it which on such a flavor).
func (f Flavor) DropsFields() bool { return f == FlavorLlamaCpp }

// FieldsFor maps p onto the chat/completions fields flavor f reads, and
// lists the set fields it does not read (which are then not sent): llama.cpp
// reads repeat_penalty, and no min_tokens, stop_token_ids,
// skip_special_tokens, spaces_between_special_tokens or no_stop_trim; vLLM
// has include_stop_str_in_output for no_stop_trim.
func (p SamplingParams) FieldsFor(f Flavor) (fields map[string]any, ignored []string) {
	m := p.OpenAIFields()
	move := func(from, to string) {
		if v, ok := m[from]; ok {
			delete(m, from)
			if to == "" {
				ignored = append(ignored, from)
			} else {
				m[to] = v
			}
		}
	}
	switch f {
	case FlavorLlamaCpp:
		move("repetition_penalty", "repeat_penalty")
		for _, k := range []string{"min_tokens", "stop_token_ids", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim"} {
			move(k, "")
		}
	case FlavorVLLM:
		if v, ok := m["no_stop_trim"].(bool); ok {
			delete(m, "no_stop_trim")
			m["include_stop_str_in_output"] = v
		}
	}
	sort.Strings(ignored)
	return m, ignored
}

// ProbeRoute finds whether the server has a POST route, without making it
// do any work: it posts an empty JSON object, which every server refuses
// (400 or 422) on a route it has, and answers 404 or 405 on one it lacks.
// missing is that answer, a Setup error naming the status and the server's
// message, when the route is absent. An Auth error, or a server that does
// not answer, is err.
func (c *Client) ProbeRoute(ctx context.Context, path string) (missing *Error, err error) {
	_, err = c.call(ctx, http.MethodPost, path, map[string]any{}, nil)
	var e *Error
	switch {
	case err == nil:
		return nil, nil
	case !errors.As(err, &e) || e.Status == 0 || e.Kind == Auth:
		return nil, err
	case e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed:
		e.Kind = Setup
		return e, nil
	}
	return nil, nil
}
