package sim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestAbortRequest: POST /abort_request answers 200 with an empty body; a
// rid in flight aborts every request whose rid starts with it (SGLang's
// prefix match: "job1" takes "job10" too, not "job2"), each answered 200
// with finish_reason abort, its slot freed at once and counted in
// num_aborted_requests_total; a rid not itself in flight aborts nothing.
func TestAbortRequest(t *testing.T) {
	s, url := testServer(t, Config{DecodeTokensPerSec: 1, Slots: 2, EnableMetrics: true})
	long := `","text":"x","sampling_params":{"max_new_tokens":1000,"ignore_eos":true}}`
	var wg sync.WaitGroup
	answers := map[string][]byte{}
	var mu sync.Mutex
	for _, rid := range []string{"job1", "job10", "job2"} {
		wg.Go(func() {
			_, b := post(t, url+"/generate", `{"rid":"`+rid+long)
			mu.Lock()
			answers[rid] = b
			mu.Unlock()
		})
	}
	waitFor(t, func() bool { st := s.Stats(); return st.Running == 2 && st.Queued == 1 })
	for _, rid := range []string{"job", "nothing"} {
		if resp, b := post(t, url+"/abort_request", `{"rid":"`+rid+`","abort_all":false}`); resp.StatusCode != 200 || len(b) != 0 {
			t.Fatalf("abort %s: %d %q; want 200, empty", rid, resp.StatusCode, b)
		}
	}
	if st := s.Stats(); st.Aborts != 0 || st.InFlight != 3 {
		t.Fatalf("aborting rids not in flight: %+v; want nothing aborted", st)
	}
	post(t, url+"/abort_request", `{"rid":"job1"}`)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(answers) == 2 })
	for _, rid := range []string{"job1", "job10"} {
		mu.Lock()
		b := answers[rid]
		mu.Unlock()
		fr := obj(t, obj(t, obj(t, decode(t, b))["meta_info"])["finish_reason"])
		if fr["type"] != "abort" {
			t.Errorf("%s answered %s; want finish_reason abort", rid, b)
		}
	}
	if st := s.Stats(); st.Aborts != 2 || st.Running != 1 || st.Queued != 0 || st.InFlight != 1 {
		t.Errorf("after aborting job1: %+v; want 2 aborted, job2 running alone", st)
	}
	_, page := do(t, http.MethodGet, url+"/metrics", "", "")
	if !strings.Contains(string(page), `sglang:num_aborted_requests_total{engine_type="unified",model_name="sim-model"} 2`) {
		t.Errorf("/metrics does not count 2 aborted:\n%s", grepLines(string(page), "aborted"))
	}
	post(t, url+"/abort_request", `{"rid":"","abort_all":true}`)
	wg.Wait()
	if st := s.Stats(); st.Aborts != 3 || st.Running != 0 {
		t.Errorf("after abort_all: %+v; want 3 aborted, none running", st)
	}

	// The OpenAI routes take the rid too.
	var chat []byte
	wg.Go(func() {
		_, chat = post(t, url+"/v1/chat/completions", `{"rid":"chat7","messages":[{"role":"user","content":"x"}],"max_tokens":1000,"ignore_eos":true}`)
	})
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	post(t, url+"/abort_request", `{"rid":"chat7"}`)
	wg.Wait()
	if fr := obj(t, arr(t, obj(t, decode(t, chat))["choices"])[0])["finish_reason"]; fr != "abort" {
		t.Errorf("aborted chat answered %s; want finish_reason abort", chat)
	}
}

// TestDisconnectCheck: with DisconnectCheck, the SGLang flavor keeps a
// request whose client left until its next look (so /abort_request still
// finds it and frees its slot at once); the other flavors stop it when
// the client leaves.
func TestDisconnectCheck(t *testing.T) {
	for _, tc := range []struct {
		flavor string
		aborts int64
	}{{FlavorSGLang, 1}, {FlavorVLLM, 0}} {
		s := New(Config{Flavor: tc.flavor, DecodeTokensPerSec: 1, DisconnectCheck: 1 << 40})
		h := s.Handler()
		gone := make(chan struct{})
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/generate" || r.URL.Path == "/v1/completions" {
				go func() { <-r.Context().Done(); close(gone) }()
			}
			h.ServeHTTP(w, r)
		}))
		path, body := "/generate", `{"rid":"left","text":"x","sampling_params":{"max_new_tokens":1000,"ignore_eos":true}}`
		if tc.flavor == FlavorVLLM {
			path, body = "/v1/completions", `{"model":"sim-model","prompt":"x","max_tokens":1000,"ignore_eos":true}`
		}
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		done := make(chan struct{})
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			close(done)
		}()
		waitFor(t, func() bool { return s.Stats().Running == 1 })
		cancel()
		<-done
		<-gone
		if tc.flavor == FlavorSGLang {
			if st := s.Stats(); st.Running != 1 {
				t.Errorf("sglang, its client gone before the next look: %+v; want it still running", st)
			}
			post(t, ts.URL+"/abort_request", `{"rid":"left"}`)
		}
		// Its slot frees before its request ends and is counted: wait
		// for the end (InFlight), not the slot (Running).
		waitFor(t, func() bool { st := s.Stats(); return st.Running == 0 && st.InFlight == 0 })
		if st := s.Stats(); st.Aborts != tc.aborts {
			t.Errorf("%s: %+v; want %d aborted", tc.flavor, st, tc.aborts)
		}
		ts.Close()
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
