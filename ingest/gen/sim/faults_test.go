package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func TestWarmup(t *testing.T) {
	_, url := testServer(t, Config{Warmup: 300 * time.Millisecond})
	if resp, b := do(t, http.MethodGet, url+"/health", "", ""); resp.StatusCode != 503 || len(b) != 0 {
		t.Errorf("health during warmup: %d %q", resp.StatusCode, b)
	}
	if resp, _ := post(t, url+"/generate", `{"text":"x"}`); resp.StatusCode != 503 {
		t.Errorf("generate during warmup: %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodGet, url+"/v1/models", "", ""); resp.StatusCode != 200 {
		t.Errorf("/v1/models during warmup: %d", resp.StatusCode)
	}
	waitFor(t, func() bool {
		resp, _ := do(t, http.MethodGet, url+"/health", "", "")
		return resp.StatusCode == 200
	})
	if resp, _ := post(t, url+"/generate", `{"text":"x"}`); resp.StatusCode != 200 {
		t.Errorf("generate after warmup: %d", resp.StatusCode)
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestStartupDelay(t *testing.T) {
	addr := freeAddr(t)
	s := New(Config{StartupDelay: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.ListenAndServe(ctx, addr) }()
	if _, err := http.Get("http://" + addr + "/health"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("before bind: %v, want connection refused", err)
	}
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == 200
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("ListenAndServe after cancel: %v", err)
	}
}

// outcomes sends n sequential requests and classifies each answer.
func outcomes(t *testing.T, url string, n int) []string {
	t.Helper()
	var out []string
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range n {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/generate", strings.NewReader(fmt.Sprintf(`{"text":"p%d"}`, i)))
		resp, err := client.Do(req)
		if err != nil {
			out = append(out, "reset")
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			out = append(out, "reset")
		case resp.StatusCode != 200:
			out = append(out, fmt.Sprint(resp.StatusCode))
		case strings.Contains(string(b), `"type":"abort"`):
			out = append(out, "abort")
		default:
			out = append(out, "ok")
		}
	}
	return out
}

func TestFaultRates(t *testing.T) {
	cfg := Config{ErrorRate: 0.2, ResetRate: 0.1, AbortRate: 0.2, Seed: 11}
	_, url := testServer(t, cfg)
	got := outcomes(t, url, 300)
	count := map[string]int{}
	for _, o := range got {
		count[o]++
	}
	near := func(n int, frac float64) bool { return math.Abs(float64(n)/300-frac) < 0.1 }
	if !near(count["500"]+count["503"], 0.2) || !near(count["reset"], 0.1) || !near(count["abort"], 0.2) || !near(count["ok"], 0.5) ||
		count["500"] == 0 || count["503"] == 0 {
		t.Errorf("outcomes %v", count)
	}
	// The same Seed gives the same sequence.
	_, url2 := testServer(t, cfg)
	if again := outcomes(t, url2, 300); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Error("same Seed, different fault sequence")
	}
}

func TestFaultShapes(t *testing.T) {
	_, url := testServer(t, Config{ErrorRate: 1})
	for range 10 {
		resp, b := post(t, url+"/generate", `{"text":"x"}`)
		switch resp.StatusCode {
		case 500:
			if string(b) != "Internal Server Error" {
				t.Errorf("500 body %q", b)
			}
		case 503:
			if m := obj(t, decode(t, b)); m["object"] != "error" || m["type"] != "503" || num(t, m["code"]) != 503 {
				t.Errorf("503 body %s", b)
			}
		default:
			t.Errorf("status %d", resp.StatusCode)
		}
	}
	_, url = testServer(t, Config{AbortRate: 1})
	m := obj(t, postOK(t, url+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":100,"ignore_eos":true}}`))
	fr := obj(t, obj(t, m["meta_info"])["finish_reason"])
	if fr["type"] != "abort" || len(ints(t, m["output_ids"])) >= 100 {
		t.Errorf("injected abort: %v", m)
	}
	m = obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`))
	if c := obj(t, arr(t, m["choices"])[0]); c["finish_reason"] != "abort" {
		t.Errorf("chat abort finish %v", c["finish_reason"])
	}
	_, url = testServer(t, Config{ResetRate: 1})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/generate", strings.NewReader(`{"text":"x"}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("reset: got status %d", resp.StatusCode)
	}
}

func TestCrashAfter(t *testing.T) {
	s := New(Config{CrashAfter: 3})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context(), ln) }()
	url := "http://" + ln.Addr().String()
	for i := range 3 {
		if resp, b := post(t, url+"/generate", `{"text":"x"}`); resp.StatusCode != 200 {
			t.Fatalf("request %d before the crash: %d %s", i, resp.StatusCode, b)
		}
	}
	if err := <-done; !errors.Is(err, ErrCrashed) {
		t.Errorf("Serve returned %v, want ErrCrashed", err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/generate", strings.NewReader(`{"text":"x"}`))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("after crash: status %d", resp.StatusCode)
	}
	if st := s.Stats(); st.Completed != 3 {
		t.Errorf("completed %d", st.Completed)
	}
}

// TestCrashOn: a request holding the trigger crashes the server, with the
// requests in flight; requests without it are answered before.
func TestCrashOn(t *testing.T) {
	s := New(Config{CrashOn: "BOOM", Slots: 1, DecodeTokensPerSec: 10})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(t.Context(), ln) }()
	url := "http://" + ln.Addr().String()
	postOK(t, url+"/generate", `{"text":"fine","sampling_params":{"max_new_tokens":1}}`)
	slow := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/generate", strings.NewReader(`{"text":"slow","sampling_params":{"max_new_tokens":1000,"ignore_eos":true}}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		slow <- err
	}()
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"BOOM"}]}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("the crashing request got status %d", resp.StatusCode)
	}
	if err := <-done; !errors.Is(err, ErrCrashed) {
		t.Errorf("Serve returned %v, want ErrCrashed", err)
	}
	if err := <-slow; err == nil {
		t.Error("a request in flight during the crash got an answer")
	}
}

func TestSlotLimit(t *testing.T) {
	s, url := testServer(t, Config{Slots: 4, DecodeTokensPerSec: 500})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			post(t, url+"/generate", fmt.Sprintf(`{"text":"p%d","sampling_params":{"max_new_tokens":25,"ignore_eos":true}}`, i))
		})
	}
	waitFor(t, func() bool { return s.Stats().Queued > 0 })
	wg.Wait()
	st := s.Stats()
	if st.MaxRunning != 4 || st.Completed != 20 || st.Running != 0 || st.Queued != 0 || st.GeneratedTokens != 20*25 || st.MaxInFlight < 5 {
		t.Errorf("stats %+v", st)
	}
	// 20 items × 25 tokens at 500 tok/s hold slots for 1 slot-second of
	// wall time; a loaded machine stretches that, so a lower bound only
	// (TestOccupancy checks the exact accounting on a fake clock).
	if st.BusySlotSeconds < 0.5 {
		t.Errorf("busy slot-seconds %.3f, want at least 1 less scheduling slack", st.BusySlotSeconds)
	}
}

func TestDisconnectFreesSlot(t *testing.T) {
	s, url := testServer(t, Config{Slots: 1, DecodeTokensPerSec: 10})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/generate", strings.NewReader(`{"text":"x","sampling_params":{"max_new_tokens":1000,"ignore_eos":true}}`))
		_, err := http.DefaultClient.Do(req)
		errc <- err
	}()
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	cancel()
	<-errc
	waitFor(t, func() bool { st := s.Stats(); return st.Running == 0 && st.Canceled == 1 })
	// The canceled request would hold the only slot for 100 s (1000
	// tokens at 10/s): the next one, of 0.2 s, must not wait for it.
	start := time.Now()
	postOK(t, url+"/generate", `{"text":"y","sampling_params":{"max_new_tokens":2}}`)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("next request waited %v: the canceled one kept its slot", d)
	}
}

// TestOccupancy runs in a synctest bubble, so time is exact: two slots, four
// items of one second each.
func TestOccupancy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Slots: 2, DecodeTokensPerSec: 100})
		h := s.Handler()
		var wg sync.WaitGroup
		codes := make([]int, 4)
		for i := range 4 {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				body := fmt.Sprintf(`{"text":"p%d","sampling_params":{"max_new_tokens":100,"ignore_eos":true}}`, i)
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/generate", strings.NewReader(body)))
				codes[i] = rec.Code
			})
		}
		synctest.Wait()
		if st := s.Stats(); st.Running != 2 || st.Queued != 2 {
			t.Errorf("at start: %+v", st)
		}
		time.Sleep(3 * time.Second)
		wg.Wait()
		for i, c := range codes {
			if c != 200 {
				t.Errorf("request %d: %d", i, c)
			}
		}
		st := s.Stats()
		if math.Abs(st.BusySlotSeconds-4) > 1e-6 || st.MaxRunning != 2 {
			t.Errorf("busy %.6f slot-seconds, max running %d", st.BusySlotSeconds, st.MaxRunning)
		}
		series := s.OccupancySeries()
		want := []float64{1, 1, 0, 0}
		if len(series) != len(want) {
			t.Fatalf("series %v", series)
		}
		for i := range want {
			if math.Abs(series[i]-want[i]) > 1e-6 {
				t.Errorf("series %v, want %v", series, want)
				break
			}
		}
	})
}
