package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestHTTPErrors(t *testing.T) {
	const tooLong = "The input (40000 tokens) is longer than the model's context length (32768 tokens)."
	for _, tc := range []struct {
		name       string
		status     int
		header     string // Retry-After
		body       string
		kind       Kind
		message    string
		retryAfter time.Duration
	}{
		{"context length", 400, "", `{"error":{"message":"` + tooLong + `"}}`, Permanent, tooLong, 0},
		{"stream-style error object", 400, "", `{"error":{"message":"top_p must be in (0, 1], got 0.0.","type":"invalid_request_error","code":400,"retryable":false}}`, Permanent, "top_p must be in (0, 1], got 0.0.", 0},
		{"422 remapped", 400, "", `{"object":"error","message":"1 validation error: input_ids must be a list","type":"Bad Request","param":null,"code":400}`, Permanent, "1 validation error: input_ids must be a list", 0},
		{"unauthorized", 401, "", `{"error":"Unauthorized"}`, Auth, "Unauthorized", 0},
		{"forbidden", 403, "", `Forbidden`, Auth, "Forbidden", 0},
		{"unknown route", 404, "", `{"detail":"Not Found"}`, Setup, "Not Found", 0},
		{"validation detail list", 422, "", `{"detail":[{"loc":["body","rid"],"msg":"bad"}]}`, Permanent, `[{"loc":["body","rid"],"msg":"bad"}]`, 0},
		{"request timeout", 408, "", ``, Transient, "Request Timeout", 0},
		{"gateway rate limit", 429, "3", `Too many requests`, Transient, "Too many requests", 3 * time.Second},
		{"unknown sampling key", 500, "", `Internal Server Error`, Transient, "Internal Server Error", 0},
		{"queue full", 503, "", `{"object":"error","message":"The request queue is full.","type":"503","param":null,"code":503}`, Transient, "The request queue is full.", 0},
		{"warming up", 503, "", ``, Transient, "Service Unavailable", 0},
		{"proxy page", 502, "", "<html>\n<body>Bad Gateway</body>\n</html>\n", Transient, "<html>\n<body>Bad Gateway</body>\n</html>", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
			e := asError(t, err)
			if e.Kind != tc.kind || e.Status != tc.status || e.Message != tc.message || e.RetryAfter != tc.retryAfter {
				t.Errorf("got kind %v status %d message %q retry-after %v\nwant kind %v status %d message %q retry-after %v",
					e.Kind, e.Status, e.Message, e.RetryAfter, tc.kind, tc.status, tc.message, tc.retryAfter)
			}
			want := "server " + f.URL + ": HTTP " + strconv.Itoa(tc.status) + ": " + tc.message
			if err.Error() != want {
				t.Errorf("Error()\n got %q\nwant %q", err.Error(), want)
			}
			if e.Op != "POST /generate" {
				t.Errorf("Op = %q", e.Op)
			}
		})
	}
}

func TestErrorMessageTruncated(t *testing.T) {
	f := newFake(t, reply(400, `{"error":{"message":"`+strings.Repeat("é", 2000)+`"}}`))
	_, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	e := asError(t, err)
	if len(e.Message) > maxMessage+3 || !strings.HasSuffix(e.Message, "...") || !strings.HasPrefix(e.Message, "é") {
		t.Errorf("message of %d bytes not truncated cleanly: %q...", len(e.Message), e.Message[:20])
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	_, err = New(url, Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	e := asError(t, err)
	if e.Kind != Transient || e.Status != 0 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("got %v (kind %v, status %d); want a Transient refusal", err, e.Kind, e.Status)
	}
	if !strings.HasPrefix(err.Error(), "server "+url+": POST /generate: ") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Error() = %q", err.Error())
	}
}

// hijack returns a handler that takes over the connection after reading the
// request and then runs do on it.
func hijack(t *testing.T, do func(net.Conn)) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		do(conn)
	}
}

func TestConnectionResetAndEOF(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(net.Conn)
	}{
		{"reset", func(c net.Conn) {
			c.(*net.TCPConn).SetLinger(0) // close with RST
			c.Close()
		}},
		{"closed without answer", func(c net.Conn) { c.Close() }},
		{"body cut short", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"text\":\"abc")
			c.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, hijack(t, tc.do))
			_, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
			if e := asError(t, err); e.Kind != Transient || e.Status != 0 {
				t.Errorf("got %v (kind %v, status %d); want Transient without status", err, e.Kind, e.Status)
			}
		})
	}
}

func TestEmptyAndInvalid200(t *testing.T) {
	empty := newFake(t, reply(http.StatusOK, ""))
	_, err := empty.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if KindOf(err) != Transient {
		t.Errorf("empty 200 body: %v; want Transient", err)
	}
	html := newFake(t, reply(http.StatusOK, "<html>hello</html>"))
	_, err = html.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if e := asError(t, err); e.Kind != Permanent || e.Status != 200 {
		t.Errorf("non-JSON 200 body: %v; want Permanent", err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	release := make(chan struct{})
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server closes
	c := f.client(Options{})

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Generate(ctx, GenerateRequest{InputIDs: []int{1}})
	if e := asError(t, err); e.Kind != Transient || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(e.Message, "timeout") {
		t.Errorf("deadline: %v (kind %v)", err, e.Kind)
	}

	// http.Client.Timeout instead of a context deadline.
	c2 := New(f.URL, Options{HTTP: &http.Client{Transport: NewTransport(2), Timeout: 50 * time.Millisecond}})
	_, err = c2.Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if KindOf(err) != Transient {
		t.Errorf("client timeout: %v; want Transient", err)
	}

	ctx, cancel = context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = c.Generate(ctx, GenerateRequest{InputIDs: []int{1}})
	if KindOf(err) != Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v (kind %v); want Canceled", err, KindOf(err))
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Kind
	}{
		{&Error{Kind: Transient}, Transient},
		{fmt.Errorf("wrapped: %w", &Error{Kind: Auth}), Auth},
		{context.Canceled, Canceled},
		{errors.New("something else"), Permanent},
	} {
		if got := KindOf(tc.err); got != tc.want {
			t.Errorf("KindOf(%v) = %v; want %v", tc.err, got, tc.want)
		}
	}
	if got := Kind(0).String(); got != "Kind(0)" {
		t.Errorf("Kind(0).String() = %q", got)
	}
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	const key = "sk-SECRET-4242"
	var errs []error
	for _, h := range []func(http.ResponseWriter, *http.Request, []byte){
		reply(401, `{"error":"Unauthorized"}`),
		reply(400, `{"error":{"message":"bad key `+key+`"}}`), // a server that echoes it
		reply(500, "Authorization: Bearer "+key),
		reply(200, `{"choices":[{"message":{"content":"x"},"finish_reason":"abort"}]}`),
		reply(200, "data: {\"error\":{\"message\":\"echo "+key+"\"}}\n\n"),
	} {
		f := newFake(t, h)
		c := f.client(Options{APIKey: key})
		_, err := c.Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
		errs = append(errs, err)
		_, err = c.Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}})
		errs = append(errs, err)
		c.PollInterval = 5 * time.Millisecond
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
		errs = append(errs, c.WaitReady(ctx, nil))
		cancel()
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c := New("http://"+addr, Options{APIKey: key})
	_, err := c.Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	errs = append(errs, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	errs = append(errs, New("http://"+addr, Options{APIKey: key, PollInterval: 5 * time.Millisecond}).WaitReady(ctx, nil))
	for i, err := range errs {
		if err == nil {
			continue
		}
		if s := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(s, key) {
			t.Errorf("error %d shows the API key: %s", i, s)
		}
	}
}

func TestBackoff(t *testing.T) {
	var b Backoff // defaults: 0.5s base, 30s cap
	for attempt, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
		for range 50 {
			if d := b.Delay(attempt); d < want/2 || d >= want {
				t.Fatalf("Delay(%d) = %v; want in [%v, %v)", attempt, d, want/2, want)
			}
		}
	}
	for _, attempt := range []int{10, 62, 63, 1000} {
		if d := b.Delay(attempt); d < 15*time.Second || d >= 30*time.Second {
			t.Errorf("Delay(%d) = %v; want capped in [15s, 30s)", attempt, d)
		}
	}
	if d := b.Delay(-1); d < 250*time.Millisecond || d >= 500*time.Millisecond {
		t.Errorf("Delay(-1) = %v", d)
	}
	custom := Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	if d := custom.Delay(5); d < 20*time.Millisecond || d >= 40*time.Millisecond {
		t.Errorf("custom Delay(5) = %v", d)
	}
	hint := &Error{Kind: Transient, Status: 429, RetryAfter: 10 * time.Second}
	if d := b.DelayFor(hint, 0); d != 10*time.Second {
		t.Errorf("DelayFor with Retry-After 10s = %v", d)
	}
	if d := custom.DelayFor(hint, 0); d != 40*time.Millisecond {
		t.Errorf("Retry-After above Max: %v; want Max", d)
	}
}
