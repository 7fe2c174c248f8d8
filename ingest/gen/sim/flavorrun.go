package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
)

// What the vLLM and llama.cpp flavors do the same way around a generation
// request: start it and read its body (each in its own shape), build and
// run its item, and write JSON lists of encoded values. Their checks,
// errors and answers are each flavor's own (vllm*.go, llamacpp*.go).

// beginFlavorRequest starts a generation request and reads its body with
// parse, the flavor's own (which answers the request and returns nil when
// the body is refused); on nil, the answer is written and the request
// ended.
func (s *Server) beginFlavorRequest(w http.ResponseWriter, r *http.Request, parse func(body []byte) map[string]json.RawMessage) (*genRequest, map[string]json.RawMessage) {
	g := s.beginGeneration(w, r)
	if g == nil {
		return nil, nil
	}
	m := parse(g.body)
	if m == nil {
		g.end(outError)
		return nil, nil
	}
	return g, m
}

// runFlavorItem builds and runs the item of a checked request. On an
// error building it, it returns the error for the caller to answer in its
// flavor's shape (the request is not ended); when the client left before
// the end, it ends the request and returns nil, nil.
func (s *Server) runFlavorItem(r *http.Request, g *genRequest, prompt []int, sp map[string]json.RawMessage, salt uint64) (*item, *apiError) {
	it, err := s.buildFlavorItem(g, prompt, sp, salt)
	if err != nil {
		return nil, err
	}
	ran := s.runItem(r.Context(), it)
	s.reqs.remove(it)
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
func (s *Server) buildFlavorItem(g *genRequest, prompt []int, sp map[string]json.RawMessage, salt uint64) (*item, *apiError) {
	params, err := parseSamplingParams(sp, unlimited)
	if err != nil {
		return nil, err
	}
	params.salt = salt
	params.noToolCall, params.oneCall = g.noToolCall, g.oneCall
	budget := max(0, min(params.maxNewTokens, s.cfg.ContextLength-len(prompt)))
	params.minNewTokens = min(params.minNewTokens, budget)
	it := &item{rid: newRID(), prompt: prompt, sp: params, budget: budget, abortAt: -1, arrival: g.arrival}
	it.plan = s.planOutput(prompt, params, budget)
	g.applyFault(it)
	if err := s.reqs.add(it); err != nil {
		return nil, err
	}
	return it, nil
}

// jsonList is the JSON array of elems, each already encoded.
func jsonList(elems ...[]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(elems, []byte{','})...), ']')
}
