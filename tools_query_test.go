package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolStopsQueried: the tool conversations gen stopped against
// `gendex sim --tool-calls` are counted in query progress (tool_stops) and
// per reason (query stops), listed with their reasons (query list
// --tool-stop), excluded under --exclude-tool-stops with theirs in query
// missing --stage tokenized, and the same from a fresh `gendex ingest` of
// the same files (the raw lines are the truth); the web view's dataset
// page shows the count and lists them.
func TestToolStopsQueried(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	dir := filepath.Join(p.dir, "agentic")
	if err := os.Rename(simToolDataset(t, 16), dir); err != nil {
		t.Fatal(err)
	}
	p.mustRun("gen", "--server", "sim", "demo") // a dataset without tools
	p.mustRun("gen", "--server", "sim", "--sim-tool-calls", "--sim-tool-call-parser", "qwen25", "--max-new-tokens", "400",
		"--include-truncated", "--export", "conversations", "--exclude-tool-stops", "agentic")

	// The truth: the raw lines' tool_stop reasons.
	want := map[string]string{} // id -> reason
	for _, l := range readRecords(t, filepath.Join(dir, "raw_responses.jsonl")) {
		var id string
		var st struct{ Reason string }
		json.Unmarshal(l["id"], &id)
		if json.Unmarshal(l["tool_stop"], &st) == nil && st.Reason != "" {
			want[id] = st.Reason
		}
	}
	byReason := map[string]int{}
	for _, r := range want {
		byReason[r]++
	}
	if len(want) == 0 || len(byReason) < 2 {
		t.Fatalf("the sim stopped %v: the test needs stops of two reasons at least", byReason)
	}

	ask := func(db string, args ...string) []map[string]any {
		t.Helper()
		r := gendex(t, testEnv(nil), append([]string{"--db", db, "query", "--format", "json"}, args...)...)
		var rows []map[string]any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rows) != nil {
			t.Fatalf("query %q: %s", args, r)
		}
		return rows
	}
	check := func(db, what string) {
		t.Helper()
		prog := ask(db, "progress", "agentic")
		if got := prog[0]["tool_stops"]; got != float64(len(want)) {
			t.Errorf("%s: progress tool_stops %v, want %d", what, got, len(want))
		}
		stops := ask(db, "stops", "agentic")[0]
		for _, reason := range []string{"other_tool", "more_calls", "no_call", "bad_arguments"} {
			if got := stops[reason]; got != float64(byReason[reason]) {
				t.Errorf("%s: stops %s %v, want %d (%v)", what, reason, got, byReason[reason], stops)
			}
		}
		listed := map[string]string{}
		for _, row := range ask(db, "list", "agentic", "--tool-stop", "any", "--limit", "1000") {
			listed[row["id"].(string)], _ = row["tool_stop"].(string)
		}
		if fmt.Sprint(listed) != fmt.Sprint(want) { // fmt sorts map keys
			t.Errorf("%s: list --tool-stop any:\n%v\nwant\n%v", what, listed, want)
		}
		for reason, n := range byReason {
			rows := ask(db, "list", "agentic", "--tool-stop", reason, "--limit", "1000")
			if len(rows) != n {
				t.Errorf("%s: list --tool-stop %s: %d rows, want %d", what, reason, len(rows), n)
			}
		}
		// Excluded with --exclude-tool-stops: missing --stage tokenized
		// says so, with the reason.
		missing := map[string]string{}
		for _, row := range ask(db, "missing", "agentic", "--stage", "tokenized") {
			missing[row["id"].(string)], _ = row["reason"].(string)
		}
		for id, reason := range want {
			if !strings.HasPrefix(missing[id], fmt.Sprintf("excluded: tool_stop: stopped (%s): ", reason)) {
				t.Errorf("%s: missing --stage tokenized says %q of %s, stopped for %s", what, missing[id], id, reason)
			}
		}
	}
	db := filepath.Join(p.dir, "gendex.db")
	check(db, "gen's index")
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	if r := gendex(t, testEnv(nil), "--db", fresh, "ingest", dir); r.code != 0 {
		t.Fatal(r)
	}
	check(fresh, "a fresh ingest")

	// A table shows the column only when some dataset has stops.
	r := gendex(t, testEnv(nil), "--db", db, "query", "--format", "table", "progress")
	if !strings.Contains(r.stdout, "tool_stops") {
		t.Errorf("progress table without tool_stops:\n%s", r.stdout)
	}
	if r := gendex(t, testEnv(nil), "--db", db, "query", "--format", "table", "progress", "B2_text"); r.code != 0 || strings.Contains(r.stdout, "stops") {
		t.Errorf("progress table of a dataset without tool stops shows them:\n%s", r)
	}

	// The web view: the dataset page's progress has the count, and its
	// tool stops view lists each with its reason, and a tab per reason.
	base, _ := startWeb(t, p, []string{"GENDEX_TOKEN=tok"})
	get := func(path string) string {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	page := get("dataset?d=agentic")
	if !strings.Contains(page, fmt.Sprintf(`data-col="tool_stops" data-v="%d"`, len(want))) || !strings.Contains(page, "view=stops") {
		t.Errorf("dataset page: no tool stops count %d or view:\n%s", len(want), page)
	}
	page = get("dataset?d=agentic&view=stops")
	for id, reason := range want {
		if !strings.Contains(page, fmt.Sprintf(`data-v="%s"`, id)) || !strings.Contains(page, fmt.Sprintf(`data-col="tool_stop" data-v="%s"`, reason)) {
			t.Errorf("tool stops view: %s (%s) not listed", id, reason)
		}
	}
	for reason, n := range byReason {
		if !strings.Contains(page, fmt.Sprintf("%s (%d)", reason, n)) {
			t.Errorf("tool stops view: no tab %s (%d)", reason, n)
		}
		// The reason's tab lists its stops, and only those.
		tabPage := get("dataset?d=agentic&view=stops&stop=" + url.QueryEscape(reason))
		for id, r := range want {
			if listed := strings.Contains(tabPage, fmt.Sprintf(`data-v="%s"`, id)); listed != (r == reason) {
				t.Errorf("tool stops view, tab %s: %s (%s) listed %v", reason, id, r, listed)
			}
		}
	}
	if strings.Contains(get("dataset?d=B2_text"), "view=stops") {
		t.Error("the page of a dataset without tool stops has a tool stops view")
	}
}
