package live_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/ingesttest"
	"gendex/query/live"
	"gendex/store/prom/promtest"
)

// TestMetricsAcceptLength: /metrics has each dataset's accept length, Σ
// completion / Σ verify over the answers that carry spec_verify_ct, and no
// sample for a dataset without any (unknown is not 0); promtool reads it,
// with a dataset of none alone too (a family without samples).
func TestMetricsAcceptLength(t *testing.T) {
	root := t.TempDir()
	for ds, text := range map[string]string{
		"drafted": `{"id":"a","completion_tokens":9,"spec_verify_ct":4}` + "\n" +
			`{"id":"b","meta_info":{"completion_tokens":10,"spec_verify_ct":2,"spec_accepted_drafts":5,"spec_proposed_drafts":6}}` + "\n" +
			`{"id":"c","completion_tokens":7}` + "\n",
		"plain": `{"id":"a","completion_tokens":3}` + "\n",
	} {
		dir := filepath.Join(root, ds)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, problems := ingesttest.Index(t, root)
	if len(problems) > 0 {
		t.Fatalf("indexing: %v", problems)
	}
	body := scrape(t, &live.Server{Src: db})
	for _, want := range []string{
		"# TYPE gendex_accept_length gauge\n",
		`gendex_accept_length{dataset="drafted"} 3.1666666666666665` + "\n", // (9+10)/(4+2)
		`gendex_spec_records{dataset="drafted"} 2` + "\n",
		`gendex_spec_records{dataset="plain"} 0` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `gendex_accept_length{dataset="plain"}`) {
		t.Errorf("a dataset without spec counts has an accept length:\n%s", body)
	}
	promtest.Check(t, []byte(body))

	plainOnly, _ := ingesttest.Index(t, filepath.Join(root, "plain"))
	promtest.Check(t, []byte(scrape(t, &live.Server{Src: plainOnly})))
}
