package query_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/web"
)

// BenchmarkWebPages serves the web view's pages from the 10 M-record
// benchmark index (see benchDB), in process, the server's time only: a
// page costs what it shows, from the index's keys, never a walk of a
// stage. (The benchmark index has no data files, so the answer page's
// stored line is an error; its facts, neighbours and prompt are asked.)
func BenchmarkWebPages(b *testing.B) {
	db := benchDB(b)
	h := web.Handler(web.Options{Ask: query.Local{Src: db}, Now: func() time.Time { return benchNow }})
	per := *benchRecords / 16 // prompts per dataset (see buildBenchDB)
	mid, far := fmt.Sprintf("B4_bench-%08d", per/2), fmt.Sprintf("B4_bench-%08d", per*2/3)
	// Each page, and a word it must hold (so a page that only says why it
	// failed is not timed as a page).
	pages := []struct{ name, url, want string }{
		{"run", "/", "B8_bench"},
		{"live", "/live", "B8_bench"},
		{"dataset", "/dataset?d=B4_bench", `rel="next"`},
		{"dataset-middle", "/dataset?d=B4_bench&after=" + mid, `rel="prev"`},
		{"cut", "/dataset?d=B4_bench&view=cut&after=" + far, ">length<"},
		{"errors", "/dataset?d=B4_bench&view=errors", "none"},
		{"sample", "/dataset?d=B4_bench&view=sample", "draw again"},
		{"missing", "/dataset?d=B4_bench&view=missing", "the first 200"},
		{"norecord", "/dataset?d=B4_bench&view=norecord", "the first 200"},
		{"answer", "/answer?d=B4_bench&id=" + mid, "completion tokens"},
		{"find", "/dataset?d=B4_bench&id=" + mid, "/answer?"},
		{"chart-30m", "/chart.svg?since=30m", "tokens/s"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:8765"+p.url, nil))
				if rec.Code != http.StatusOK && rec.Code != http.StatusSeeOther || !strings.Contains(rec.Body.String()+rec.Header().Get("Location"), p.want) {
					b.Fatalf("%s: %d\n%s", p.url, rec.Code, rec.Body)
				}
			}
		})
	}
}
