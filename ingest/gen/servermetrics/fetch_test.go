package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"gendex/ingest/gen/servermetrics/metricstest"
	"gendex/store"
)

// TestFetchMetrics reads /metrics over HTTP: SGLang's text, a 404 (no
// --enable-metrics), another status; and never puts the URL, with its
// credentials, in an error.
func TestFetchMetrics(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/ok/metrics" && r.URL.Query().Get("key") == "s3cret":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			fmt.Fprint(w, metricstest.SGLang)
		case r.URL.Path == "/broken/metrics":
			http.Error(w, "boom", http.StatusInternalServerError)
		default:
			http.NotFound(w, r)
		}
	}))
	defer hs.Close()
	u, err := URL(hs.URL + "/ok/?key=s3cret")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Fetch(context.Background(), hs.Client(), u, "")
	if err != nil || r.flavor != store.FlavorSGLang || len(r.values) != 9 { // the metrics read, not the histogram nor _created
		t.Fatalf("%+v, %v", r, err)
	}
	if _, err := Fetch(context.Background(), hs.Client(), hs.URL+"/none/metrics", ""); !errors.Is(err, ErrNoMetrics) {
		t.Errorf("404: %v", err)
	}
	if _, err := Fetch(context.Background(), hs.Client(), hs.URL+"/broken/metrics", ""); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("500: %v", err)
	}
	_, err = Fetch(context.Background(), hs.Client(), "http://user:pw@127.0.0.1:1/metrics?key=s3cret", "")
	if err == nil || strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("refused: %v", err)
	}
}

// TestFetchMetrics501: llama-server without --metrics answers 501
// not_supported_error: no /metrics, as SGLang's 404, told as llama.cpp with
// its own hint; another server's 501 is no /metrics without that hint. The
// Process-Start-Time-Unix header of an answer is kept for telling restarts.
func TestFetchMetrics501(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/llama/metrics":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusNotImplemented)
			fmt.Fprint(w, "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}")
		case "/other/metrics":
			http.Error(w, "not implemented", http.StatusNotImplemented)
		case "/on/metrics":
			w.Header().Set(StartTimeHeader, "5021733148")
			fmt.Fprint(w, metricstest.LlamaCpp)
		}
	}))
	defer hs.Close()
	_, err := Fetch(context.Background(), hs.Client(), hs.URL+"/llama/metrics", "")
	var nm *NoMetricsError
	if !errors.Is(err, ErrNoMetrics) || !errors.As(err, &nm) || nm.Flavor != store.FlavorLlamaCpp || nm.Hint() != "start llama-server with --metrics" {
		t.Errorf("llama.cpp's 501: %v %+v", err, nm)
	}
	_, err = Fetch(context.Background(), hs.Client(), hs.URL+"/other/metrics", "")
	if !errors.Is(err, ErrNoMetrics) || !errors.As(err, &nm) || nm.Flavor != store.FlavorUnknown || strings.Contains(nm.Hint(), "--metrics") {
		t.Errorf("another 501: %v %+v", err, nm)
	}
	r, err := Fetch(context.Background(), hs.Client(), hs.URL+"/on/metrics", "")
	if err != nil || r.flavor != store.FlavorLlamaCpp || r.startHeader != "5021733148" {
		t.Errorf("%+v %v", r, err)
	}
}
