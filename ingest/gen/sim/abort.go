package sim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// How an item stops before its end: its client leaves, or SGLang's
// POST /abort_request names it. Each item runs under a context of its own
// (itemContext) that either ends; the engine frees its slot (or its place
// in the knee scheduler's batch) the moment it does. An item the abort
// stopped answers its still-waiting client 200 with finish_reason abort,
// as SGLang does, and is counted in num_aborted_requests_total; one whose
// client left is not answered.

// handleAbort serves SGLang's POST /abort_request {"rid","abort_all"}: 200
// with an empty body, whatever it found. As in SGLang, a rid not itself in
// flight aborts nothing (TokenizerManager's check), and one that is aborts
// every item whose rid starts with it (the scheduler's prefix match);
// abort_all aborts them all. The API key applies, as to every SGLang route
// but /health and /metrics.
func (s *sglang) handleAbort(w http.ResponseWriter, r *http.Request) {
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		writeOpenAIError(w, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	m, verr := decodeBody(body, "Input should be a dictionary or an instance of AbortReq")
	if verr == nil {
		verr = checkFields(m, map[string]kind{"rid": kStr, "abort_all": kBool})
	}
	if verr != nil {
		writeOpenAIError(w, verr)
		return
	}
	rid, _ := asString(m["rid"])
	s.eng.reqs.abort(rid, boolField(m, "abort_all", false))
	w.WriteHeader(http.StatusOK)
}

// abort stops the items /abort_request names (see handleAbort) and
// returns how many.
func (r *registry) abort(rid string, all bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !all && (rid == "" || r.m[rid] == nil) {
		return 0
	}
	n := 0
	for id, it := range r.m {
		if all || strings.HasPrefix(id, rid) {
			it.abortAsked = true
			if it.stop != nil {
				it.stop()
			}
			n++
		}
	}
	return n
}

// itemContext returns the context it runs under and its release: it ends
// when /abort_request names it, and when its client is gone: at once, or,
// on the SGLang flavor with Config.DisconnectCheck, at the next look.
func (e *engine) itemContext(client context.Context, it *item) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var cancel context.CancelFunc
	if check := e.cfg.DisconnectCheck; check > 0 && e.cfg.Flavor == FlavorSGLang {
		ctx, cancel = context.WithCancel(context.WithoutCancel(client))
		go lookForClient(client, ctx, cancel, check)
	} else {
		ctx, cancel = context.WithCancel(client)
	}
	e.reqs.mu.Lock()
	it.stop = cancel
	asked := it.abortAsked // named between its registration and now
	e.reqs.mu.Unlock()
	if asked {
		cancel()
	}
	return ctx, cancel
}

// lookForClient ends the item's context (ctx, by cancel) at the first look,
// every check, that finds its client gone; it returns when ctx ends.
func lookForClient(client, ctx context.Context, cancel context.CancelFunc, check time.Duration) {
	t := time.NewTicker(check)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if client.Err() != nil {
				cancel()
				return
			}
		}
	}
}

// settleAbort makes an item /abort_request stopped before its end an
// aborted answer, not a client gone: SGLang's message for an item still
// queued, the simulator's for one decoding.
func (e *engine) settleAbort(it *item) {
	e.reqs.mu.Lock()
	asked := it.abortAsked
	e.reqs.mu.Unlock()
	if !asked || it.finish != nil {
		return // not named, or finished first
	}
	msg := "Aborted"
	if it.produced == 0 {
		msg = "Abort in waiting queue"
	}
	it.canceled = false
	it.finish = &finishReason{kind: finishAbort, message: msg}
}
