package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// Giving a request up on the server. Closing a request's connection (what
// canceling its context does: Go's transport closes a connection whose
// request or body read was canceled, never pools it) is the way every
// flavor sees it: vLLM's routes abort a request whose client left, and
// llama-server stops it; SGLang notices only at its next look at the
// connection (every SGLANG_REQUEST_STATE_WAIT_TIMEOUT, 4 s), so on SGLang
// Abort stops it at once. Pending tells the caller which request to name.

// AbortTimeout bounds one Abort: a run that gives requests up waits for
// their aborts, so a server that does not answer must not hold it.
const AbortTimeout = 3 * time.Second

// CanAbort reports whether the flavor's server stops one request on
// demand: SGLang's POST /abort_request, by the rid gendex sends on
// /generate and on its OpenAI routes alike. vLLM's /abort_requests exists
// only with --tokens-only, and llama.cpp has none: there, closing the
// connection is the way.
func (f Flavor) CanAbort() bool { return f == FlavorSGLang }

// abortBody is SGLang's AbortReq.
type abortBody struct {
	RID      string `json:"rid"`
	AbortAll bool   `json:"abort_all"`
}

// Abort asks the server to stop the request rid: POST /abort_request
// {"rid":rid,"abort_all":false}, within AbortTimeout, never retried. SGLang
// answers 200 with an empty body whether or not rid is still there, and its
// request, if it was, returns to its caller as a 200 whose finish_reason is
// abort (an *Error, never a Result). SGLang matches rid as a prefix of the
// rids in flight: NewRID's rids never start with one another. A server
// with --admin-api-key answers 401 (the API key is not accepted there), a
// gateway without the route 404: an *Error of kind Auth or Setup.
func (c *Client) Abort(ctx context.Context, rid string) error {
	if rid == "" {
		return c.requestError("POST /abort_request", "no rid: an empty rid would abort every request")
	}
	ctx, cancel := context.WithTimeout(ctx, AbortTimeout)
	defer cancel()
	_, err := c.call(ctx, http.MethodPost, "/abort_request", abortBody{RID: rid}, nil)
	return err
}

// Pending is the generation request (Generate, Chat or Complete) made
// under a context it is attached to (WithPending), from the moment its
// headers are written to the server until the server answers it with any
// status: the request a caller that gives up may ask the server to abort
// (one still waiting for a connection in the transport is not). One
// Pending serves one attempt, its requests made one after another. The
// zero value is ready; it is safe for concurrent use.
type Pending struct {
	mu    sync.Mutex
	rid   string
	wrote bool // rid's headers reached the server
}

type pendingKey struct{}

// WithPending returns ctx carrying p: the client records in p the
// generation request it sends under the returned context.
func WithPending(ctx context.Context, p *Pending) context.Context {
	return context.WithValue(ctx, pendingKey{}, p)
}

// pendingIn is the Pending ctx carries, or nil.
func pendingIn(ctx context.Context) *Pending {
	p, _ := ctx.Value(pendingKey{}).(*Pending)
	return p
}

// RID returns the rid of the generation request sent and not answered, or
// "" when there is none (none sent, or the server answered).
func (p *Pending) RID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wrote {
		return ""
	}
	return p.rid
}

// sent records that the request rid is about to be sent (p may be nil).
func (p *Pending) sent(rid string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.rid, p.wrote = rid, false
	p.mu.Unlock()
}

// traced returns ctx with a trace that records in p (if any) when a
// request's headers are written.
func (p *Pending) traced(ctx context.Context) context.Context {
	if p == nil {
		return ctx
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {
		p.mu.Lock()
		p.wrote = true
		p.mu.Unlock()
	}})
}

// answered records that the server answered: a non-streaming answer's
// status comes once the server has finished the request (p may be nil).
func (p *Pending) answered() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.rid = ""
	p.mu.Unlock()
}

// AbortRefused reports whether err, from Abort, says the server will take
// no abort from this client (no route, or not with this key), so a caller
// need not ask it again.
func AbortRefused(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Kind == Auth || e.Kind == Setup)
}
