package servermetrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"gendex/ingest/gen/servermetrics/metricstest"
	"gendex/store"
)

// restartsOf is what RestartedSince says of each reading against the one
// before it (the first against none), the empty answers left out.
func restartsOf(readings ...*Reading) []string {
	var got []string
	var prev *Reading
	for _, r := range readings {
		if why := r.RestartedSince(prev); why != "" {
			got = append(got, why)
		}
		prev = r
	}
	return got
}

// TestRestartedSince: a counter that went back, or another process start
// time, is a restart; counters that only grew are not.
func TestRestartedSince(t *testing.T) {
	read := func(tokens, start float64) *Reading {
		r := &Reading{flavor: store.FlavorSGLang, values: map[string]float64{keyGen: tokens}, names: map[string]string{keyGen: "sglang:generation_tokens_total"}}
		if start > 0 {
			r.values[keyStart] = start
		}
		return r
	}
	got := restartsOf(read(100, 0), read(200, 0), read(50, 0), read(60, 1.7e9), read(70, 1.7e9), read(80, 1.8e9))
	want := []string{"sglang:generation_tokens_total went back from 200 to 50",
		"its process start time changed from 2023-11-14T22:13:20Z to 2027-01-15T08:00:00Z"}
	if !slices.Equal(got, want) {
		t.Errorf("restarts %q\nwant %q", got, want)
	}
}

// TestStartHeaderRestart: llama-server's Process-Start-Time-Unix header
// (its start on a monotonic clock, not a Unix time: compared, never shown
// as a date) changing between two readings is a restart, even when its
// counters grew past their old values in between; the same header is
// none. Other names behind the URL are a restart too.
func TestStartHeaderRestart(t *testing.T) {
	var start atomic.Value
	start.Store("5021733148")
	tokens := atomic.Int64{}
	tokens.Store(96000)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(StartTimeHeader, start.Load().(string))
		fmt.Fprint(w, strings.Replace(metricstest.LlamaCpp, "tokens_predicted_total 96000", fmt.Sprint("tokens_predicted_total ", tokens.Load()), 1))
	}))
	defer hs.Close()
	fetch := func() *Reading {
		r, err := Fetch(context.Background(), hs.Client(), hs.URL+"/metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var readings []*Reading
	readings = append(readings, fetch())
	tokens.Store(97000)
	readings = append(readings, fetch()) // same start: none
	start.Store("5029911410")
	tokens.Store(98000) // restarted, and already past the old count
	readings = append(readings, fetch(), fetch())
	readings = append(readings, &Reading{flavor: store.FlavorVLLM, values: map[string]float64{}, names: map[string]string{}})
	want := []string{
		"its Process-Start-Time-Unix header changed from 5021733148 to 5029911410 (llama-server gives its start there)",
		"its /metrics now has vLLM's names (it had llama.cpp's)",
	}
	if got := restartsOf(readings...); !slices.Equal(got, want) {
		t.Errorf("restarts %q\nwant %q", got, want)
	}
}

// TestCounterWentBackNamesItsFlavor: a restart by a counter going back
// names the counter as that server calls it.
func TestCounterWentBackNamesItsFlavor(t *testing.T) {
	r1, _ := readFixture(t, metricstest.VLLM, nil)
	r2, _ := readFixture(t, strings.ReplaceAll(metricstest.VLLM, "generation_tokens_total{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 50000.0", "generation_tokens_total{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 0.0"), r1)
	if got := restartsOf(r1, r2); !slices.Equal(got, []string{"vllm:generation_tokens_total went back from 120000 to 70000"}) {
		t.Errorf("restarts %q", got)
	}
}
