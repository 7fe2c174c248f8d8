package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Client talks to one SGLang server, sgl-model-gateway or OpenAI-compatible
// server. Its methods are safe for concurrent use; the number of concurrent
// calls is the caller's to bound. Set the fields before the first call and
// do not change them afterwards.
type Client struct {
	// BaseURL is the server's root, such as "http://127.0.0.1:30000", without
	// a trailing slash or "/v1".
	BaseURL string
	// APIKey, when non-empty, is sent as "Authorization: Bearer <APIKey>".
	// It never appears in errors or in the output of String.
	APIKey string
	// HTTP sends every request; nil means http.DefaultClient.
	HTTP *http.Client
	// Model is sent as "model" to the OpenAI-compatible endpoints and to
	// /v1/tokenize when non-empty.
	Model string
	// Flavor is the server software (from /v1/models): it picks the
	// tokenize route, the sampling field names and whether answers carry
	// output ids (see Flavor).
	Flavor Flavor
	// Simulated says the server is gendex's simulator (its /v1/models
	// says so); every answer's Result is then marked Simulated.
	Simulated bool
	// Provenance, when set, is a JSON object saying how this client's
	// answers are made (the sampling sent, the server's identity); every
	// answer's Result carries it.
	Provenance []byte
	// RIDPrefix starts every request id (default "gendex").
	RIDPrefix string
	// ChatTemplateKwargs is sent as "chat_template_kwargs" by Chat and
	// TokenizeMessages (for example {"enable_thinking": false}) unless the
	// request sets its own.
	ChatTemplateKwargs map[string]any
	// PollInterval is the pause between readiness probes (default 1s).
	PollInterval time.Duration
}

// Options configure New. The zero value is usable.
type Options struct {
	APIKey string
	// HTTP, when non-nil, is used as is. Otherwise New builds a client
	// around NewTransport(Concurrency) with no overall timeout: per-request
	// deadlines come from the caller's contexts.
	HTTP *http.Client
	// Concurrency sizes the transport New builds (default 64).
	Concurrency        int
	Model              string
	RIDPrefix          string
	ChatTemplateKwargs map[string]any
	PollInterval       time.Duration
}

// String describes o without its API key.
func (o Options) String() string {
	return "client.Options{APIKey: " + redactedKey(o.APIKey) + ", Concurrency: " + strconv.Itoa(o.Concurrency) +
		", Model: " + strconv.Quote(o.Model) + "}"
}

// GoString is String, so %#v does not print the API key either.
func (o Options) GoString() string { return o.String() }

// New returns a Client for baseURL. A trailing "/" or "/v1" of its path is
// removed, so an OpenAI-style base URL works too. A base path (a router's
// or proxy's prefix, "http://host/sglang") and a query string
// ("?key=..."): both are kept, and every request goes to the base path
// joined with the endpoint's ("/sglang/generate"), with the query string.
// Several Clients may share one *http.Client (one transport per run)
// through opts.HTTP.
func New(baseURL string, opts Options) *Client {
	base := trimBase(baseURL)
	hc := opts.HTTP
	if hc == nil {
		n := opts.Concurrency
		if n <= 0 {
			n = 64
		}
		hc = &http.Client{Transport: NewTransport(n)}
	}
	return &Client{
		BaseURL:            base,
		APIKey:             opts.APIKey,
		HTTP:               hc,
		Model:              opts.Model,
		RIDPrefix:          opts.RIDPrefix,
		ChatTemplateKwargs: opts.ChatTemplateKwargs,
		PollInterval:       opts.PollInterval,
	}
}

// trimBase removes a trailing "/" and "/v1" from the path of the URL raw,
// keeping its query string (a fragment is never sent, and goes). It works
// on the text, so the URL is printed as it was given (a path in another
// script is not percent-encoded).
func trimBase(raw string) string {
	raw, _, _ = strings.Cut(raw, "#")
	base, query, hasQuery := strings.Cut(raw, "?")
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	if hasQuery {
		return base + "?" + query
	}
	return base
}

// endpoints caches each server root and path's URL: a request's URL is
// parsed once per server, not once per request.
var endpoints sync.Map // BaseURL + "\x00" + path -> string

// endpoint is the URL of path ("/generate") on the server: BaseURL's path
// joined with path as URL paths are joined, BaseURL's query string kept.
func (c *Client) endpoint(path string) (string, error) {
	key := c.BaseURL + "\x00" + path
	if s, ok := endpoints.Load(key); ok {
		return s.(string), nil
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", errors.New("the server URL does not parse as scheme://host[:port][/path][?query] (check --server)")
	}
	s := u.JoinPath(path).String()
	endpoints.Store(key, s)
	return s, nil
}

// NewTransport returns an HTTP/1.1 transport for concurrency simultaneous
// requests to each server: it opens at most concurrency connections per host
// and keeps all of them idle between requests, so they are reused instead of
// churned. Idle connections are dropped after 4 s, before SGLang's (uvicorn)
// 5 s keep-alive closes them under a request. There is no response-header
// timeout: a generation may take many minutes. Proxies come from the
// environment (HTTP_PROXY, NO_PROXY), as with http.DefaultTransport.
func NewTransport(concurrency int) *http.Transport {
	if concurrency < 1 {
		concurrency = 1
	}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		Protocols:             &protocols,
		MaxIdleConns:          0, // no global limit; the per-host limits below apply
		MaxIdleConnsPerHost:   concurrency,
		MaxConnsPerHost:       concurrency,
		IdleConnTimeout:       4 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// String describes c without its API key. (A value receiver, so printing a
// Client value is as safe as printing a pointer.)
func (c Client) String() string {
	return "client.Client{BaseURL: " + c.server() + ", APIKey: " + redactedKey(c.APIKey) + "}"
}

// GoString is String, so %#v does not print the API key either.
func (c Client) GoString() string { return c.String() }

func redactedKey(k string) string {
	if k == "" {
		return `""`
	}
	return "REDACTED"
}

// server returns BaseURL redacted for printing (see RedactURL).
func (c *Client) server() string { return RedactURL(c.BaseURL) }

// Server returns the server's base URL with any credentials redacted: the
// form to print, log, store in output lines or use as a metrics label.
func (c *Client) Server() string { return c.server() }

// RedactURL returns raw fit to print or store: the userinfo of a URL
// ("http://user:pw@host") becomes "REDACTED@" and a query string becomes
// "REDACTED", since either may carry credentials. A string that does not
// parse as a URL but contains "@" or "?" is replaced by "(unprintable
// URL)"; anything else is returned as is. It is the one function gendex
// uses wherever a server URL is printed or stored.
func RedactURL(raw string) string {
	if !strings.ContainsAny(raw, "@?") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unprintable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	u.ForceQuery = false
	return u.String()
}

// redact removes the API key from s.
func (c *Client) redact(s string) string {
	if c.APIKey == "" || !strings.Contains(s, c.APIKey) {
		return s
	}
	return strings.ReplaceAll(s, c.APIKey, "REDACTED")
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// ridCounter numbers request ids process-wide.
var ridCounter atomic.Uint64

// NewRID returns a fresh request id "<RIDPrefix>-<counter>-<8 hex digits>".
// The counter is unique within the process and the random suffix separates
// processes, so an id is never reused while an earlier request may still run
// on the server. The "-" after the counter keeps SGLang's prefix-matching
// /abort_request from catching other ids.
func (c *Client) NewRID() string {
	prefix := c.RIDPrefix
	if prefix == "" {
		prefix = "gendex"
	}
	return ridOf(prefix, ridCounter.Add(1), rand.Uint32())
}

// ridOf is the rid numbered n with the random suffix r.
func ridOf(prefix string, n uint64, r uint32) string {
	b := make([]byte, 0, len(prefix)+30)
	b = append(b, prefix...)
	b = append(b, '-')
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '-')
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(r>>shift)&0xf])
	}
	return string(b)
}

const hexDigits = "0123456789abcdef"

// send performs one request with a JSON body (when in is non-nil) and
// returns the response if its status is 2xx; the caller must close its body
// with drainClose. Any other outcome is an *Error whose response body has
// been consumed.
func (c *Client) send(ctx context.Context, method, path string, in any, accept string) (*http.Response, error) {
	op := method + " " + path
	var body io.Reader
	if in != nil {
		b, err := encodeBody(in)
		if err != nil {
			return nil, c.requestError(op, "encoding request: "+err.Error())
		}
		body = bytes.NewReader(b)
	}
	target, err := c.endpoint(path)
	if err != nil {
		e := c.requestError(op, err.Error())
		e.Err = err
		return nil, e
	}
	req, err := http.NewRequestWithContext(pendingIn(ctx).traced(ctx), method, target, body)
	if err != nil {
		e := c.requestError(op, c.redact(err.Error()))
		e.Err = err
		return nil, e
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, c.transportError(ctx, op, err)
	}
	pendingIn(ctx).answered() // any status: the server is done with it
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := c.statusError(op, resp)
		drainClose(resp.Body)
		return nil, e
	}
	return resp, nil
}

// call performs one JSON request and decodes a 2xx answer into out (when
// out is non-nil). It returns the time the body was fully read.
func (c *Client) call(ctx context.Context, method, path string, in, out any) (time.Time, error) {
	resp, err := c.send(ctx, method, path, in, "application/json")
	if err != nil {
		return time.Time{}, err
	}
	defer drainClose(resp.Body)
	if out != nil {
		if err := decodeBody(resp.Body, out); err != nil {
			return time.Time{}, c.decodeError(ctx, method+" "+path, resp.StatusCode, err)
		}
	}
	return time.Now(), nil
}

// decodeBody decodes a JSON answer into out: a /generate answer, gen's
// every answer, by decodeGenerate; anything else by encoding/json.
func decodeBody(body io.Reader, out any) error {
	g, ok := out.(*generateResponse)
	if !ok {
		return json.NewDecoder(body).Decode(out)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	return decodeGenerate(b, g)
}

// drainClose reads what is left of a body (up to a bound) and closes it, so
// the connection can be reused.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 256<<10))
	_ = body.Close()
}
