package gen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// abortServer is a server of the aborter's tests: an SGLang simulator
// whose answers take minutes, that notices a client gone every check (0:
// at once), behind gate (nil: none), and its server.
func abortServer(t *testing.T, check time.Duration, gate func(w http.ResponseWriter, r *http.Request) bool) (*sim.Server, *server) {
	t.Helper()
	sv := sim.New(sim.Config{DecodeTokensPerSec: 1, DisconnectCheck: check})
	h := sv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if gate == nil || gate(w, r) {
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		// A test that failed may leave a request running for minutes:
		// stop them all (past the gate), so that Close need not wait.
		r := httptest.NewRequest(http.MethodPost, "/abort_request", strings.NewReader(`{"abort_all":true}`))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(httptest.NewRecorder(), r)
	})
	c := client.New(hs.URL, client.Options{})
	c.Flavor = client.FlavorSGLang
	s := &server{name: c.Server()}
	s.cl.Store(c)
	return sv, s
}

// askLong starts, as the asker does, an attempt on s whose answer takes
// minutes, and returns once the server holds it; done gives what end said.
func askLong(t *testing.T, ab *aborter, ctx context.Context, s *server, sv *sim.Server) (done <-chan bool) {
	t.Helper()
	actx, at := ab.begin(ctx, s)
	ch := make(chan bool, 1)
	go func() {
		n := 500
		_, err := s.client().Generate(actx, client.GenerateRequest{Text: "long", Sampling: client.SamplingParams{MaxNewTokens: &n}})
		ch <- ab.end(at, err)
	}()
	simWait(t, sv, "the server runs the request", func(st sim.Stats) bool { return st.Running == 1 })
	return ch
}

// simWait waits until cond holds of sv's stats, failing the test after
// 30 s (a state that never comes, not a measure of speed).
func simWait(t *testing.T, sv *sim.Server, what string, cond func(sim.Stats) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(sv.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never (%+v)", what, sv.Stats())
		}
	}
}

// TestRetiredServerRequestsAborted: retiring a server ends the attempts in
// flight on it, each aborted on the server at once (its slot freed, not
// after the answer) and reported as ended by the retirement, so the asker
// asks its prompt again elsewhere.
func TestRetiredServerRequestsAborted(t *testing.T) {
	t.Parallel()
	sv, s := abortServer(t, time.Hour, nil)
	ab := &aborter{ctl: &control{log: &syncBuffer{}}}
	done := askLong(t, ab, t.Context(), s, sv)
	ab.retire(s)
	if retired := <-done; !retired {
		t.Error("end did not report the retirement")
	}
	// end returns once the server was asked: a request only disconnected
	// would run on there for an hour (the test's DisconnectCheck).
	if ab.onServer.Load() != 1 {
		t.Fatalf("ended: %d aborted on the server, %d closed only; want the request aborted on the server", ab.onServer.Load(), ab.closed.Load())
	}
	simWait(t, sv, "the request ends on the server", func(st sim.Stats) bool { return st.InFlight == 0 })
	if st := sv.Stats(); st.Aborts != 1 || st.Running != 0 || ab.onServer.Load() != 1 || ab.closed.Load() != 0 {
		t.Errorf("server %+v, aborted %d, closed %d; want the one request aborted on the server", st, ab.onServer.Load(), ab.closed.Load())
	}
}

// TestAbortRefusedSaidOnce: a server without /abort_request (a gateway's
// 404) is asked once: the request is given up by closing its connection,
// which is said once and counted; the next one is not asked again.
func TestAbortRefusedSaidOnce(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	sv, s := abortServer(t, 0, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/abort_request" {
			return true
		}
		asked.Add(1)
		http.NotFound(w, r)
		return false
	})
	log := &syncBuffer{}
	ab := &aborter{ctl: &control{log: log}}
	for range 2 {
		ctx, cancel := context.WithCancel(t.Context())
		done := askLong(t, ab, ctx, s, sv)
		cancel()
		if <-done {
			t.Error("end reported a retirement")
		}
		simWait(t, sv, "the closed request ends on the server", func(st sim.Stats) bool { return st.InFlight == 0 })
	}
	if asked.Load() != 1 || ab.closed.Load() != 2 || ab.onServer.Load() != 0 || strings.Count(log.String(), "/abort_request failed") != 1 {
		t.Errorf("asked %d times, closed %d, aborted %d; log:\n%s\nwant asked once, 2 closed, said once", asked.Load(), ab.closed.Load(), ab.onServer.Load(), log)
	}
}
