package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// received is one request as the fake server saw it.
type received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// fake is an httptest server that records every request and answers with
// handle.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []received
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, received{r.Method, r.URL.Path, r.Header.Clone(), body})
		f.mu.Unlock()
		handle(w, r, body)
	}))
	t.Cleanup(f.Close)
	return f
}

// reply answers with a fixed status and body.
func reply(status int, body string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func (f *fake) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.reqs...)
}

func (f *fake) last(t *testing.T) received {
	t.Helper()
	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("the server received no request")
	}
	return reqs[len(reqs)-1]
}

// client returns a Client for f with its own small transport.
func (f *fake) client(opts Options) *Client {
	if opts.HTTP == nil {
		opts.HTTP = &http.Client{Transport: NewTransport(8)}
	}
	return New(f.URL, opts)
}

// object decodes a JSON object body, keeping numbers exact.
func object(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", b, err)
	}
	return m
}

// keys returns the sorted keys of m as one string.
func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// asError returns err as an *Error or fails.
func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	return e
}

func TestNewTransport(t *testing.T) {
	tr := NewTransport(48)
	if tr.MaxIdleConnsPerHost != 48 || tr.MaxConnsPerHost != 48 {
		t.Errorf("per-host limits = %d idle, %d total; want 48, 48", tr.MaxIdleConnsPerHost, tr.MaxConnsPerHost)
	}
	if tr.IdleConnTimeout <= 0 || tr.IdleConnTimeout >= 5*time.Second {
		t.Errorf("IdleConnTimeout = %v; want below SGLang's 5s keep-alive", tr.IdleConnTimeout)
	}
	if tr.Protocols == nil || tr.Protocols.HTTP2() || !tr.Protocols.HTTP1() {
		t.Errorf("Protocols = %v; want HTTP/1 only", tr.Protocols)
	}
	if tr.ResponseHeaderTimeout != 0 {
		t.Errorf("ResponseHeaderTimeout = %v; generations may be long", tr.ResponseHeaderTimeout)
	}
	if got := NewTransport(0).MaxConnsPerHost; got != 1 {
		t.Errorf("NewTransport(0).MaxConnsPerHost = %d; want 1", got)
	}
}

// TestTransportPool checks that many concurrent requests share at most
// concurrency connections and reuse them.
func TestTransportPool(t *testing.T) {
	const concurrency, workers, perWorker = 4, 32, 8
	var newConns, inflight, peak atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		io.Copy(io.Discard, r.Body)
		time.Sleep(time.Millisecond)
		io.WriteString(w, `{"text":"x","output_ids":[1],"meta_info":{"prompt_tokens":1,"completion_tokens":1,"finish_reason":{"type":"stop","matched":1}}}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	c := New(srv.URL, Options{Concurrency: concurrency})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range workers {
		wg.Go(func() {
			for range perWorker {
				if _, err := c.Generate(t.Context(), GenerateRequest{InputIDs: []int{1, 2}}); err != nil {
					failures.Add(1)
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.FailNow()
	}
	if got := newConns.Load(); got > concurrency {
		t.Errorf("opened %d connections for %d requests; want at most %d", got, workers*perWorker, concurrency)
	}
	if got := peak.Load(); got > concurrency {
		t.Errorf("peak in-flight requests at the server = %d; want at most %d", got, concurrency)
	}
}

func TestNewNormalizesBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:30000":      "http://h:30000",
		"http://h:30000/":     "http://h:30000",
		"http://h:8000/v1":    "http://h:8000",
		"http://h:8000/v1/":   "http://h:8000",
		"http://h:8000/api/":  "http://h:8000/api",
		"http://u:pw@h:30000": "http://u:pw@h:30000",
	} {
		if got := New(in, Options{}).BaseURL; got != want {
			t.Errorf("New(%q).BaseURL = %q; want %q", in, got, want)
		}
	}
	if got := New("http://u:pw@h:30000", Options{}).server(); strings.Contains(got, "pw") {
		t.Errorf("server() = %q; the password must be redacted", got)
	}
}

func TestNewRID(t *testing.T) {
	c := &Client{RIDPrefix: "job42"}
	seen := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				rid := c.NewRID()
				mu.Lock()
				if seen[rid] {
					t.Errorf("rid %q issued twice", rid)
				}
				seen[rid] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rid := c.NewRID()
	var n uint64
	var suffix string
	if _, err := fmt.Sscanf(strings.ReplaceAll(rid, "-", " "), "job42 %d %s", &n, &suffix); err != nil || len(suffix) != 8 {
		t.Errorf("rid %q does not look like job42-<counter>-<8 hex>", rid)
	}
	if got := (&Client{}).NewRID(); !strings.HasPrefix(got, "gendex-") {
		t.Errorf("default rid %q; want prefix gendex-", got)
	}
}

// lateServer reserves a free port and returns its address and a function
// that starts serving handler on it.
func lateServer(t *testing.T, handler http.Handler) (addr string, start func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close() // nobody listens now: connections are refused
	return addr, func() {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("reopening %s: %v", addr, err)
			return
		}
		srv := &http.Server{Handler: handler}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}
}

func TestWaitReadyRefusedWarmingReady(t *testing.T) {
	var healthCalls atomic.Int64
	addr, start := lateServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			t.Errorf("probe went to %s", r.URL.Path)
		}
		if healthCalls.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable) // warming up: empty body
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	c := New("http://"+addr, Options{PollInterval: 5 * time.Millisecond})
	var states []ReadyState
	var elapsed []time.Duration
	report := func(r Readiness) {
		states = append(states, r.State)
		elapsed = append(elapsed, r.Elapsed)
		if r.State == StateRefused && len(states) == 3 {
			start() // the "model" has loaded: the port opens
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, report); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	want := []ReadyState{StateRefused, StateRefused, StateRefused, StateWarmingUp, StateWarmingUp, StateReady}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Errorf("states = %v; want %v", states, want)
	}
	for i := 1; i < len(elapsed); i++ {
		if elapsed[i] < elapsed[i-1] {
			t.Errorf("elapsed went backwards: %v", elapsed)
		}
	}
}

func TestWaitReadyDeadline(t *testing.T) {
	f := newFake(t, reply(http.StatusServiceUnavailable, ""))
	c := f.client(Options{PollInterval: 5 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Millisecond)
	defer cancel()
	var reports atomic.Int64
	err := c.WaitReady(ctx, func(Readiness) { reports.Add(1) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady = %v; want a deadline error", err)
	}
	if !strings.Contains(err.Error(), "warming up (503)") || !strings.Contains(err.Error(), f.URL) {
		t.Errorf("error %q should name the server and the last state", err)
	}
	if reports.Load() < 2 {
		t.Errorf("reported %d times; want one report per probe", reports.Load())
	}
}

func TestWaitReadyStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		kind   Kind
	}{
		{http.StatusUnauthorized, `{"error":"Unauthorized"}`, Auth},
		{http.StatusNotFound, `{"detail":"Not Found"}`, Setup},
	} {
		f := newFake(t, reply(tc.status, tc.body))
		c := f.client(Options{PollInterval: time.Millisecond})
		err := c.WaitReady(t.Context(), nil)
		if e := asError(t, err); e.Kind != tc.kind || e.Status != tc.status {
			t.Errorf("HTTP %d: got %v (%v); want kind %v", tc.status, err, e.Kind, tc.kind)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("HTTP %d: %d probes; want 1", tc.status, n)
		}
	}
}

func TestWaitReadySendsKey(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, ""))
	if err := f.client(Options{APIKey: "k1"}).WaitReady(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.last(t).Header.Get("Authorization"); got != "Bearer k1" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestServedModel(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, `{"object":"list","data":[{"id":"kimi-k2.5","object":"model","created":1796064752,"owned_by":"sglang","root":"/models/kimi","parent":null,"max_model_len":262144}]}`))
	c := f.client(Options{APIKey: "k"})
	m, err := c.ServedModel(t.Context())
	if err != nil || m.MaxModelLen != 262144 || m.ID != "kimi-k2.5" {
		t.Errorf("ServedModel = %+v, %v; want kimi-k2.5, 262144", m, err)
	}
	r := f.last(t)
	if r.Method != http.MethodGet || r.Path != "/v1/models" || r.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("request = %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
	}

	empty := newFake(t, reply(http.StatusOK, `{"object":"list","data":[]}`))
	if _, err := empty.client(Options{}).ServedModel(t.Context()); KindOf(err) != Permanent {
		t.Errorf("empty model list: %v; want a Permanent error", err)
	}
	noLen := newFake(t, reply(http.StatusOK, `{"object":"list","data":[{"id":"m"}]}`))
	if m, err := noLen.client(Options{}).ServedModel(t.Context()); err != nil || m.MaxModelLen != 0 {
		t.Errorf("missing max_model_len: %+v, %v; want 0 and no error", m, err)
	}
}

func TestTokenizeMessages(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, `{"tokens":[163587,1008,163601,3923],"count":4,"max_model_len":1000000000000000019884624838656}`))
	c := f.client(Options{ChatTemplateKwargs: map[string]any{"enable_thinking": false}})
	msgs := []Message{{Role: "system", Content: "You are concise."}, {Role: "user", Content: "What is a KV cache?"}}
	ids, err := c.TokenizeMessages(t.Context(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != "[163587 1008 163601 3923]" {
		t.Errorf("ids = %v", ids)
	}
	r := f.last(t)
	if r.Path != "/v1/tokenize" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request = %s %s", r.Path, r.Header.Get("Content-Type"))
	}
	body := object(t, r.Body)
	if keys(body) != "chat_template_kwargs,messages" {
		t.Errorf("body keys = %s", keys(body))
	}
	if got := string(r.Body); !strings.Contains(got, `"messages":[{"role":"system","content":"You are concise."},{"role":"user","content":"What is a KV cache?"}]`) {
		t.Errorf("body = %s", got)
	}
}

func TestTokenizeUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		body        string
		unsupported bool
		kind        Kind
	}{
		{"old server 404", 404, `{"detail":"Not Found"}`, true, Permanent},
		{"vllm 404", 404, `{"object":"error","message":"Not Found","type":"NotFoundError","param":null,"code":404}`, true, Permanent},
		{"prompt required 400", 400, `{"object":"error","message":"[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required', 'input': {'messages': []}}]","type":"Bad Request","param":null,"code":400}`, true, Permanent},
		{"prompt required 422", 422, `{"detail":[{"type":"missing","loc":["body","prompt"],"msg":"Field required"}]}`, true, Permanent},
		{"other 400", 400, `{"object":"error","message":"Conversation roles must alternate user/assistant","type":"BadRequest","param":null,"code":400}`, false, Permanent},
		{"auth", 401, `{"error":"Unauthorized"}`, false, Auth},
		{"server error", 500, `Internal Server Error`, false, Transient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(tc.status, tc.body))
			_, err := f.client(Options{}).TokenizeMessages(t.Context(), []Message{{Role: "user", Content: "hi"}})
			if got := errors.Is(err, ErrTokenizeUnsupported); got != tc.unsupported {
				t.Errorf("errors.Is(%v, ErrTokenizeUnsupported) = %v; want %v", err, got, tc.unsupported)
			}
			if e := asError(t, err); e.Kind != tc.kind || e.Status != tc.status {
				t.Errorf("kind %v status %d; want %v %d", e.Kind, e.Status, tc.kind, tc.status)
			}
		})
	}
}

func TestClientStringHidesKey(t *testing.T) {
	const key = "sk-very-secret-42"
	opts := Options{APIKey: key, Model: "m"}
	c := New("http://h:30000", opts)
	for _, s := range []string{
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%v %+v %#v", *c, *c, *c),
		fmt.Sprintf("%v", []*Client{c}), fmt.Sprintf("%+v", struct{ C *Client }{c}),
		fmt.Sprint(opts), fmt.Sprintf("%v %+v %#v", opts, opts, opts),
	} {
		if strings.Contains(s, key) {
			t.Errorf("%q shows the API key", s)
		}
	}
	if s := c.String(); !strings.Contains(s, "http://h:30000") {
		t.Errorf("String() = %q; want the base URL", s)
	}
}
