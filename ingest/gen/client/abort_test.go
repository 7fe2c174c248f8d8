package client

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAbort: Abort posts SGLang's AbortReq for one rid with the API key,
// takes 200 with an empty body as done, and tells a server that will take
// no abort (401 under --admin-api-key, 404 without the route) from one
// that failed this once. An empty rid, which SGLang's prefix match would
// take for every request, is never sent.
func TestAbort(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, ""))
	c := f.client(Options{APIKey: "sk-test"})
	if err := c.Abort(t.Context(), "gendex-7-0000abcd"); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	got := f.last(t)
	body := object(t, got.Body)
	if got.Method != http.MethodPost || got.Path != "/abort_request" || body["rid"] != "gendex-7-0000abcd" || body["abort_all"] != false ||
		got.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("sent %s %s %s (auth %q); want POST /abort_request {rid, abort_all:false} with the key", got.Method, got.Path, got.Body, got.Header.Get("Authorization"))
	}
	if err := c.Abort(t.Context(), ""); err == nil || len(f.requests()) != 1 {
		t.Errorf("Abort of an empty rid: %v, %d requests; want an error and nothing sent", err, len(f.requests()))
	}
	for _, tc := range []struct {
		status  int
		body    string
		refused bool
	}{
		{401, `{"error":"Unauthorized"}`, true},
		{404, `{"detail":"Not Found"}`, true},
		{503, `{"object":"error","message":"busy","code":503}`, false},
	} {
		err := newFake(t, reply(tc.status, tc.body)).client(Options{}).Abort(t.Context(), "r-1-00000000")
		if err == nil || AbortRefused(err) != tc.refused {
			t.Errorf("status %d: %v, refused %v; want an error, refused %v", tc.status, err, AbortRefused(err), tc.refused)
		}
	}
}

// TestPendingNamesTheUnansweredRequest: under WithPending, the rid of a
// generation request the server holds is known until the server answers
// it, whatever the status; a request canceled before its answer keeps it
// (the one to abort).
func TestPendingNamesTheUnansweredRequest(t *testing.T) {
	arrived := make(chan string, 1)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "hold") {
			arrived <- string(body)
			<-r.Context().Done()
			return
		}
		if strings.Contains(string(body), "refuse") {
			reply(400, `{"error":{"message":"no"}}`)(w, r, body)
			return
		}
		reply(200, `{"text":"ok","output_ids":[5],"meta_info":{"finish_reason":{"type":"stop"}}}`)(w, r, body)
	})
	c := f.client(Options{})
	for _, text := range []string{"answer", "refuse"} {
		var p Pending
		c.Generate(WithPending(t.Context(), &p), GenerateRequest{Text: text})
		if rid := p.RID(); rid != "" {
			t.Errorf("%s: pending rid %q after the server answered; want none", text, rid)
		}
	}
	var p Pending
	ctx, cancel := context.WithCancel(WithPending(t.Context(), &p))
	done := make(chan error, 1)
	go func() {
		_, err := c.Chat(ctx, ChatRequest{Messages: []Message{{Role: "user", Content: "hold"}}})
		done <- err
	}()
	body := <-arrived
	rid := p.RID()
	if rid == "" || !strings.Contains(body, `"rid":"`+rid+`"`) {
		t.Errorf("pending rid %q while the server holds %s", rid, body)
	}
	cancel()
	if err := <-done; KindOf(err) != Canceled {
		t.Errorf("canceled request: %v", err)
	}
	if p.RID() != rid {
		t.Errorf("pending rid %q after the cancel; want %q (never answered)", p.RID(), rid)
	}

	// One connection, held: a request waiting for it never reached the
	// server, so there is nothing to abort.
	one := f.client(Options{HTTP: &http.Client{Transport: NewTransport(1)}})
	hctx, release := context.WithCancel(t.Context())
	go one.Generate(hctx, GenerateRequest{Text: "hold"})
	<-arrived
	var q Pending
	qctx, qcancel := context.WithTimeout(WithPending(t.Context(), &q), 100*time.Millisecond)
	_, err := one.Generate(qctx, GenerateRequest{Text: "answer"})
	qcancel()
	release()
	if q.RID() != "" || err == nil {
		t.Errorf("a request that never had a connection: %v, pending rid %q; want an error and none", err, q.RID())
	}
}

// TestCancelClosesTheConnection: canceling a request closes its HTTP/1.1
// connection, both while the server works (no answer yet) and while the
// answer's body is in flight: the server sees its client gone (what vLLM,
// llama-server and, at its next look, SGLang stop a request on), and the
// connection never goes back to the pool for the next request.
func TestCancelClosesTheConnection(t *testing.T) {
	for _, partial := range []bool{false, true} {
		var mu sync.Mutex
		states := map[net.Conn][]http.ConnState{}
		arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.Contains(readAll(r), "hold") {
				reply(200, `{"text":"ok","output_ids":[5],"meta_info":{"finish_reason":{"type":"stop"}}}`)(w, r, nil)
				return
			}
			if partial {
				w.Header().Set("Content-Length", "1000")
				w.WriteHeader(http.StatusOK)
				w.Write([]byte(`{"text":"`))
				http.NewResponseController(w).Flush()
			}
			arrived <- struct{}{}
			<-r.Context().Done()
			gone <- struct{}{}
		}))
		srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
			mu.Lock()
			states[c] = append(states[c], s)
			mu.Unlock()
		}
		srv.Start()
		c := New(srv.URL, Options{HTTP: &http.Client{Transport: NewTransport(4)}})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := c.Generate(ctx, GenerateRequest{Text: "hold"})
			done <- err
		}()
		<-arrived
		cancel()
		<-done
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatalf("partial body %v: the server never saw its client go", partial)
		}
		if _, err := c.Generate(t.Context(), GenerateRequest{Text: "next"}); err != nil {
			t.Fatalf("the next request: %v", err)
		}
		srv.Close()
		mu.Lock()
		usedOnce := 0
		for _, s := range states {
			active := 0
			for _, st := range s {
				if st == http.StateActive {
					active++
				}
			}
			if active == 1 && s[len(s)-1] == http.StateClosed {
				usedOnce++
			}
		}
		if len(states) != 2 || usedOnce != 2 {
			t.Errorf("partial body %v: connections %v; want two, each used by one request (the canceled one not pooled)", partial, states)
		}
		mu.Unlock()
	}
}

func readAll(r *http.Request) string {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// TestRIDsNeverPrefixOneAnother: SGLang aborts every rid in flight that
// starts with the one named, so no rid gen makes may start another:
// counters of every width (1 and 10..19, 12 and 120..129) and any suffix.
func TestRIDsNeverPrefixOneAnother(t *testing.T) {
	var rids []string
	for _, n := range []uint64{1, 2, 9, 10, 11, 12, 19, 99, 100, 120, 123, 129, 1000, 1234, 12345} {
		for _, r := range []uint32{0, 1, 0x10, 0xabcdef01, 0xabcdef0, 0xffffffff} {
			rids = append(rids, ridOf("gendex", n, r))
		}
	}
	c := &Client{}
	for range 1000 {
		rids = append(rids, c.NewRID())
	}
	sort.Strings(rids)
	// Sorted, a rid that starts another comes right before some rid that
	// starts with it.
	for i := 1; i < len(rids); i++ {
		if strings.HasPrefix(rids[i], rids[i-1]) {
			t.Errorf("rid %q starts %q: aborting the first would abort both", rids[i-1], rids[i])
		}
	}
}
