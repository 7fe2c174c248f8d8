package sim

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkGenerateHandler measures the zero-latency path of /generate
// without the network.
func BenchmarkGenerateHandler(b *testing.B) {
	h := New(Config{}).Handler()
	body := `{"text":"What is the capital of France?","sampling_params":{"max_new_tokens":64}}`
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/generate", strings.NewReader(body)))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkGenerateParallel measures many concurrent clients over loopback
// HTTP with zero latency; see the reported req/s.
func BenchmarkGenerateParallel(b *testing.B) {
	ts := httptest.NewServer(New(Config{}).Handler())
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := fmt.Sprintf(`{"text":"prompt %d","sampling_params":{"max_new_tokens":32}}`, n.Add(1))
			resp, err := client.Post(ts.URL+"/generate", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			var buf [4096]byte
			for {
				if _, err := resp.Body.Read(buf[:]); err != nil {
					break
				}
			}
			resp.Body.Close()
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
