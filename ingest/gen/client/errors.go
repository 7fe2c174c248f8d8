package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gendex/store"
)

// Kind says what a caller should do about an Error.
type Kind int

const (
	// Transient errors may succeed when retried with a fresh rid after a
	// backoff: connection refused or reset, timeouts, EOF on a stale
	// keep-alive connection, HTTP 408, 429 and 5xx (including 503 while
	// warming up or when the queue is full), a 200 answer whose
	// finish_reason is abort.
	Transient Kind = iota + 1
	// Permanent errors will fail again for the same request: HTTP 400 (for
	// example "The input (N tokens) is longer than the model's context
	// length"), other 4xx except those below, a malformed answer, or a
	// request the client refuses to send.
	Permanent
	// Auth errors (HTTP 401 and 403) fail every request until the API key
	// is fixed.
	Auth
	// Canceled means the caller's context was canceled; nothing is wrong
	// with the request or the server.
	Canceled
	// Setup errors fail every request to the server until the caller's
	// settings change: HTTP 404 or 405 on the route (the server has no such
	// endpoint: a wrong API or URL), including vLLM's and OpenAI's 404 for a
	// model the server does not serve ("The model `x` does not exist.").
	// Error.ModelNotFound tells the two apart.
	Setup
)

// String returns the lower-case name of k.
func (k Kind) String() string {
	switch k {
	case Transient:
		return "transient"
	case Permanent:
		return "permanent"
	case Auth:
		return "auth"
	case Canceled:
		return "canceled"
	case Setup:
		return "setup"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is the error returned by every Client method that talks to a server.
// Its text never contains the API key.
type Error struct {
	Kind Kind
	// Status is the HTTP status code, 0 when no response arrived, and 200 for
	// an abort or an error event reported inside a successful response.
	Status int
	// Message is the server's message parsed from the error body, or a
	// description of the transport failure.
	Message string
	// Server is the base URL of the server (userinfo redacted).
	Server string
	// Op is the request, such as "POST /generate".
	Op string
	// RetryAfter is the server's Retry-After hint, 0 when absent.
	RetryAfter time.Duration
	// Err is the underlying cause, if any: a transport error, a context
	// error, or ErrTokenizeUnsupported.
	Err error
}

// Error reads like
//
//	server http://h:30000: HTTP 400: The input (40000 tokens) is longer than ...
//
// for an HTTP error and like
//
//	server http://h:30000: POST /generate: dial tcp ...: connection refused
//
// when no response arrived.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("server ")
	b.WriteString(e.Server)
	b.WriteString(": ")
	if e.Status != 0 {
		b.WriteString("HTTP ")
		b.WriteString(strconv.Itoa(e.Status))
	} else {
		b.WriteString(e.Op)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// ModelNotFound reports whether e is a 404 about the model rather than the
// route: vLLM answers {"message":"The model `x` does not exist.",
// "type":"NotFoundError"} and OpenAI "The model `x` does not exist or you do
// not have access to it." (code "model_not_found").
func (e *Error) ModelNotFound() bool {
	return e.Status == http.StatusNotFound && strings.Contains(strings.ToLower(e.Message), "model")
}

// ErrTokenizeUnsupported is returned (wrapped in a Permanent *Error) by
// TokenizeMessages when the server cannot tokenize chat messages: it answers
// 404 or 405 (SGLang older than v0.5.3.post1, or vLLM) or 400 asking for
// "prompt" (SGLang before PR #23981); callers should fall back to Chat. It
// is also returned by TokenizeText when the server has no /v1/tokenize.
var ErrTokenizeUnsupported = errors.New("the server has no usable /v1/tokenize (for chat messages or text)")

// KindOf returns the Kind of err: the Kind of an *Error in its chain,
// Canceled for context.Canceled, and Permanent for anything else.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	return Permanent
}

// kindForStatus classifies a non-2xx HTTP status.
func kindForStatus(status int) Kind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return Auth
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return Setup
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		return Transient
	}
	return Permanent
}

// transportError builds the Error for a request that got no usable response.
func (c *Client) transportError(ctx context.Context, op string, err error) *Error {
	e := &Error{Kind: Transient, Server: c.server(), Op: op, Err: err}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // url.Error repeats the method and URL; keep the cause
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		e.Kind, e.Message, e.Err = Canceled, "canceled", ctx.Err()
		return e
	case errors.Is(err, context.DeadlineExceeded):
		e.Message = "timeout: " + err.Error()
		return e
	}
	e.Message = c.redact(err.Error())
	e.Kind = transportKind(err)
	return e
}

// transportKind classifies an error from a round trip or a body read.
func transportKind(err error) Kind {
	var dns *net.DNSError
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return Transient
	case errors.As(err, &dns):
		if dns.IsTimeout || dns.IsTemporary {
			return Transient
		}
		return Permanent // no such host
	case errors.As(err, &ne) && ne.Timeout():
		return Transient
	case errors.As(err, &op):
		return Transient // unreachable, broken pipe, ...
	case strings.Contains(err.Error(), "server closed idle connection"),
		strings.Contains(err.Error(), "connection broken"):
		return Transient
	}
	return Permanent // bad scheme, TLS verification, ...
}

// isRefused reports whether err is a refused TCP connection.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// maxErrorBody bounds how much of an error body is read.
const maxErrorBody = 64 << 10

// statusError builds the Error for a non-2xx response and consumes its body.
func (c *Client) statusError(op string, resp *http.Response) *Error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	return &Error{
		Kind:       kindForStatus(resp.StatusCode),
		Status:     resp.StatusCode,
		Message:    c.redact(serverMessage(body, resp.StatusCode)),
		Server:     c.server(),
		Op:         op,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After")),
	}
}

// serverMessage extracts the human message from an error body. It knows the
// shapes SGLang, its gateway, FastAPI and vLLM use:
//
//	{"error":{"message":"..."}}
//	{"object":"error","message":"...","type":...,"code":...}
//	{"error":"Unauthorized"}
//	{"detail":"Not Found"} or {"detail":[...]}
//
// and falls back to the trimmed text, or to the status text for an empty body.
func serverMessage(body []byte, status int) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return http.StatusText(status)
	}
	if body[0] == '{' {
		var v struct {
			Error   json.RawMessage `json:"error"`
			Message json.RawMessage `json:"message"`
			Detail  json.RawMessage `json:"detail"`
		}
		if json.Unmarshal(body, &v) == nil {
			if m := jsonMessage(v.Error); m != "" {
				return m
			}
			if m := jsonMessage(v.Message); m != "" {
				return m
			}
			if m := jsonMessage(v.Detail); m != "" {
				return m
			}
		}
	}
	return truncate(string(body))
}

// jsonMessage returns raw as a message: a string as is, an object's
// "message", or any other non-null value as compact JSON.
func jsonMessage(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return truncate(s)
	}
	var o struct {
		Message string `json:"message"`
	}
	if raw[0] == '{' && json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return truncate(o.Message)
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return truncate(b.String())
	}
	return truncate(string(raw))
}

// maxMessage bounds the length of Error.Message.
const maxMessage = 1024

// truncate cuts s to maxMessage bytes at a character boundary (store.Clip)
// and marks the cut with "...".
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return store.Clip(s, maxMessage) + "..."
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// decodeError builds the Error for a 200 response whose body could not be
// read or decoded. A syntax or type error is Permanent; a body cut short
// (EOF, reset, timeout) is Transient.
func (c *Client) decodeError(ctx context.Context, op string, status int, err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &se) || errors.As(err, &te) {
		return &Error{Kind: Permanent, Status: status, Server: c.server(), Op: op,
			Message: "invalid response body: " + c.redact(err.Error()), Err: err}
	}
	e := c.transportError(ctx, op, err)
	if e.Kind != Canceled {
		e.Kind = Transient
		e.Message = "reading response: " + e.Message
	}
	return e
}

// requestError builds the Permanent Error for a request the client refuses
// to send.
func (c *Client) requestError(op, msg string) *Error {
	return &Error{Kind: Permanent, Server: c.server(), Op: op, Message: msg}
}

// Backoff computes jittered exponential retry delays. The zero value uses
// DefaultBackoff's settings.
type Backoff struct {
	Base time.Duration // first delay before jitter; default 500ms
	Max  time.Duration // cap on any delay; default 30s
}

// DefaultBackoff starts at 0.5 s and is capped at 30 s.
var DefaultBackoff = Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}

// Delay returns the pause before retry number attempt (0 for the first
// retry): d = min(Max, Base·2^attempt), drawn uniformly from [d/2, d).
func (b Backoff) Delay(attempt int) time.Duration {
	base, limit := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoff.Base
	}
	if limit <= 0 {
		limit = DefaultBackoff.Max
	}
	d := limit
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 62 && base <= limit>>attempt {
		d = base << attempt
	}
	half := d / 2
	return half + rand.N(d-half)
}

// DelayFor is Delay, but not shorter than the server's Retry-After hint in
// err (itself capped at Max).
func (b Backoff) DelayFor(err error, attempt int) time.Duration {
	d := b.Delay(attempt)
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > d {
		limit := b.Max
		if limit <= 0 {
			limit = DefaultBackoff.Max
		}
		d = min(e.RetryAfter, limit)
	}
	return d
}

// abortError builds the Error for a response whose finish_reason is abort.
// An abort without a status code (from /abort_request or a disconnect) is
// Transient; one with a status code is classified by that code.
func (c *Client) abortError(op, message string, code *int) *Error {
	kind, msg := Transient, "request aborted"
	if code != nil && *code != 0 {
		kind = kindForStatus(*code)
		if kind == Auth || kind == Setup { // about this request, not the route
			kind = Permanent
		}
		msg = fmt.Sprintf("request aborted (status %d)", *code)
	}
	if message != "" {
		msg += ": " + c.redact(truncate(message))
	}
	return &Error{Kind: kind, Status: http.StatusOK, Message: msg, Server: c.server(), Op: op}
}
