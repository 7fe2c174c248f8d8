package web_test

import (
	"html"
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

// TestRunPageShowsRunState: the run page (and its live part) says the
// last run's state: a stall's sentence, as text.
func TestRunPageShowsRunState(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), `{"id":"a","prompt":"q"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	sentence := "stalled since 03:12: 61 requests held by gpu1:30000, which answers no probe <b>"
	run := &store.Run{Start: time.Now().Add(-time.Hour).UnixMilli(), Pid: 7, Host: "n", Kind: "gen", State: store.RunStalled, Detail: sentence}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(run) }); err != nil {
		t.Fatal(err)
	}
	db.HoldRun(run)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText, Token: "", Index: "test.db", Now: time.Now}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/", "/live"} {
		code, body, _ := get(t, srv.Client(), srv.URL+path)
		if code != 200 || !strings.Contains(body, html.EscapeString(sentence)) || strings.Contains(body, "probe <b>") {
			t.Errorf("%s: %d; want the run's stall sentence, escaped:\n%s", path, code, body)
		}
	}
}

// TestRunPageShowsKilledRunFromIndex: a run killed without saying so is
// lost on the run page, with the answers it made and the work owed as the
// index holds them, not its last row's.
func TestRunPageShowsKilledRunFromIndex(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), `{"id":"a","prompt":"q"}`+"\n"+`{"id":"b","prompt":"q"}`+"\n")
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), `{"id":"a","text":"r"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	said := int64(2) // its last row: 0 answers, 2 to go
	run := &store.Run{Start: time.Now().Add(-time.Hour).UnixMilli(), Pid: 8, Host: "n", Kind: "gen", State: store.RunRunning,
		ToGo: &said, Answers: new(int64), Datasets: []string{"d"}, AtStart: &store.Tally{ToGo: &said}}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(run) }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText, Token: "", Index: "test.db", Now: time.Now}))
	t.Cleanup(srv.Close)
	code, body, _ := get(t, srv.Client(), srv.URL+"/")
	if code != 200 || !strings.Contains(body, "1 answer, 1 to go: it ended without saying so") || !strings.Contains(body, html.EscapeString("the index's")) {
		t.Errorf("/: %d; want the lost run with the index's 1 answer and 1 to go:\n%s", code, body)
	}
}
