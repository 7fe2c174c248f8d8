package web_test

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/web"
	"gendex/store"
)

// TestRunPageShowsLimit: the run page's server table has gen's limit and
// its requests in flight (unknown for a server whose samples keep none),
// and the page charts the limit per server; that chart and the tokens/s
// charts mark each limit change, its own glyph and colour, with gen's
// reason, beside the downs. An index whose samples keep no limit has
// neither the columns nor the chart.
func TestRunPageShowsLimit(t *testing.T) {
	now := time.Now()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), `{"id":"a","prompt":"q"}`+"\n"+`{"id":"b","prompt":"q"}`+"\n")
	answered := func(id string, ago time.Duration) string { // the charts span the answers' times
		return `{"id":"` + id + `","text":"r","completion_tokens":3,"finished_at":"` + now.Add(-ago).UTC().Format(time.RFC3339) + `"}` + "\n"
	}
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), answered("a", 3*time.Minute)+answered("b", 10*time.Second))
	db, _ := ingesttest.Index(t, root)
	old, _ := ingesttest.Index(t, root)
	run := now.Add(-2 * time.Minute).UnixMilli()
	for i := range 24 {
		at := now.Add(time.Duration(i-24) * 5 * time.Second).UnixMilli()
		limit := int64(128)
		if i >= 12 {
			limit = 1040
		}
		put := func(db *store.DB, server string, s store.ServerSample) {
			if err := db.Update(func(tx *store.Tx) error { return tx.PutServerSample(server, &s) }); err != nil {
				t.Fatal(err)
			}
		}
		put(db, "http://gpu1:30000", store.ServerSample{Time: at, Up: true, Run: run, Limit: limit, InFlight: limit - 9})
		put(db, "http://gpu2:30000", store.ServerSample{Time: at, Up: true, Run: run})
		put(old, "http://gpu2:30000", store.ServerSample{Time: at, Up: true, Run: run})
	}
	err := db.Update(func(tx *store.Tx) error {
		for _, e := range []store.Event{
			{Time: now.Add(-90 * time.Second).UnixMilli(), Server: "http://gpu2:30000", Name: "down", Detail: "2 requests in flight"},
			{Time: now.Add(-60 * time.Second).UnixMilli(), Server: "http://gpu1:30000", Name: "limit", Detail: "128 -> 1040: room (running 128 of 1024, no queue)"},
		} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	site := func(db *store.DB) *httptest.Server {
		srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText, Index: "test.db", Now: time.Now}))
		t.Cleanup(srv.Close)
		return srv
	}
	srv := site(db)
	code, body, _ := get(t, srv.Client(), srv.URL+"/")
	for _, want := range []string{
		`>limit</th>`, `>gen&#39;s in flight</th>`,
		`<td data-col="limit" data-v="1040" class="num ">1,040</td><td data-col="in_flight" data-v="1031" class="num ">1,031</td>`,
		`<td data-col="limit" class="unknown">unknown</td>`,
		`<img src="/chart.svg?metric=limit"`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/: %d, no %s:\n%s", code, want, body)
		}
	}
	limitMark := `stroke="#6a3fb5" stroke-dasharray="2 4"><title>gpu1:30000 limit 128→1040 128 -&gt; 1040: room (running 128 of 1024, no queue)</title>`
	for _, path := range []string{"/chart.svg?metric=limit", "/chart.svg", "/chart.svg?since=30m"} {
		code, svg, _ := get(t, srv.Client(), srv.URL+path)
		if code != 200 || !strings.Contains(svg, limitMark) || !strings.Contains(svg, "↕ gpu1:30000 limit 128→1040 (128 -&gt; 1040") ||
			!strings.Contains(svg, `stroke="#c62828" stroke-dasharray="4 3"><title>gpu2:30000 down`) {
			t.Errorf("%s: %d; want the limit change and the down marked:\n%s", path, code, svg)
		}
	}
	if _, svg, _ := get(t, srv.Client(), srv.URL+"/chart.svg?metric=limit"); !strings.Contains(svg, "gen&#39;s in-flight limit, total and per server") ||
		!strings.Contains(svg, "gpu1:30000: mean ") || !strings.Contains(svg, "gpu2:30000: no value known") {
		t.Errorf("the limit chart's panels:\n%s", svg)
	}

	srv = site(old)
	_, body, _ = get(t, srv.Client(), srv.URL+"/")
	if strings.Contains(body, `data-col="limit"`) || strings.Contains(body, "metric=limit") {
		t.Errorf("an index without limits shows them:\n%s", body)
	}
}
