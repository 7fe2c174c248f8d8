package live_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/ingesttest"
	"gendex/query/live"
	"gendex/store/prom"
	"gendex/store/prom/promtest"
)

// scrape serves srv's /metrics over HTTP and returns what a GET gets,
// checking its Content-Type.
func scrape(t *testing.T, srv *live.Server) string {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != prom.ContentType {
		t.Errorf("Content-Type %q", ct)
	}
	return string(body)
}

func TestMetrics(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	srv := &live.Server{Src: db, Extra: func(p *prom.Writer) {
		p.Family("gendex_in_flight", "Requests in flight, by server.", prom.Gauge)
		p.Int(3, "server", "s")
	}}
	body := scrape(t, srv)
	for _, want := range []string{
		"# TYPE gendex_records gauge",
		`gendex_records{dataset="alpha",stage="raw"} 7`, // see query's TestFixtureIsWhatTheTestsAssume
		`gendex_unknown_token_records{dataset="alpha"} 1`,
		`gendex_in_flight{server="s"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// Every sample line is "name{labels} integer".
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], "gendex_") {
			t.Errorf("malformed sample %q", line)
		}
	}
}

// TestMetricsDatasetNames: dataset names are label values escaped as the
// exposition format asks (a quote, a backslash; everything else as it is:
// a tab, a zero-width joiner), and promtool reads the whole of /metrics,
// Extra samples included.
func TestMetricsDatasetNames(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{`数据"集\`, "👩\u200d💻\ttab", `a\nb`, "plain"} {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lines := `{"id":"1","text":"hi"}` + "\n" + `{"id":"2","text":"ho"}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, problems := ingesttest.Index(t, root)
	if len(problems) > 0 {
		t.Fatalf("indexing: %v", problems)
	}
	extra := func(p *prom.Writer) {
		p.Family("gendex_in_flight", "Requests in flight, by server.", prom.Gauge)
		p.Int(3, "server", `http://REDACTED@gpu-ü:30000/"\`)
	}
	body := scrape(t, &live.Server{Src: db, Extra: extra})
	for _, want := range []string{
		`gendex_records{dataset="数据\"集\\",stage="prompts"} 2` + "\n",
		"gendex_records{dataset=\"👩\u200d💻\ttab\",stage=\"prompts\"} 2\n",
		`gendex_records{dataset="a\\nb",stage="prompts"} 2` + "\n",
		`gendex_missing_raw{dataset="数据\"集\\"} 2` + "\n",
		`gendex_in_flight{server="http://REDACTED@gpu-ü:30000/\"\\"} 3` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	promtest.Check(t, []byte(body))
}

// TestMetricsNewStages: /metrics has every stage's records, the turns and
// exclusions among them, and the exclusions and the answers not exported.
func TestMetricsNewStages(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, text := range map[string]string{
		"prompts.jsonl":       `{"id":"a","text":"q"}` + "\n" + `{"id":"b","text":"q"}` + "\n" + `{"id":"c","text":"q"}` + "\n",
		"raw_responses.jsonl": `{"id":"a","text":"x","completion_tokens":3}` + "\n" + `{"id":"b","text":"x","completion_tokens":3}` + "\n",
		"turns.jsonl":         `{"id":"c","turn":1,"turns":2,"text":"x","completion_tokens":2}` + "\n",
		"excluded.jsonl":      `{"id":"a","reason":"length","detail":"d"}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, problems := ingesttest.Index(t, root)
	if len(problems) > 0 {
		t.Fatalf("indexing: %v", problems)
	}
	body := scrape(t, &live.Server{Src: db})
	for _, want := range []string{
		`gendex_records{dataset="ds",stage="turns"} 1` + "\n",
		`gendex_records{dataset="ds",stage="excluded"} 1` + "\n",
		`gendex_excluded{dataset="ds"} 1` + "\n",
		`gendex_missing_tokenized{dataset="ds"} 1` + "\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	promtest.Check(t, []byte(body))
}
