package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/query"
)

// check runs `gendex check` with args in p.dir and returns its exit code,
// stdout and stderr.
func (p *placeRun) check(args ...string) (code int, stdout, stderr string) {
	p.t.Helper()
	return runGendex(p.t, p.bin, p.dir, append([]string{"check"}, args...)...)
}

// checkJSON runs `gendex check --format json` with args and returns its
// exit code and each dataset's reasons by name, with their counts.
func (p *placeRun) checkJSON(args ...string) (code int, reasons map[string]map[string]float64, out string) {
	p.t.Helper()
	code, out, errOut := p.check(append([]string{"--format", "json"}, args...)...)
	var v struct {
		Ready    bool
		Datasets []struct {
			Dataset string
			Ready   bool
			Reasons []struct {
				Reason string
				Blocks bool
				Count  *float64
				Tokens *float64
				Detail string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		p.t.Fatalf("gendex check --format json %q: %v\n%s\n%s", args, err, out, errOut)
	}
	reasons = map[string]map[string]float64{}
	for _, d := range v.Datasets {
		reasons[d.Dataset] = map[string]float64{}
		for _, r := range d.Reasons {
			n := -1.0
			if r.Count != nil {
				n = *r.Count
			}
			reasons[d.Dataset][r.Reason] = n
			if r.Tokens != nil {
				reasons[d.Dataset][r.Reason+".tokens"] = *r.Tokens
			}
		}
	}
	if v.Ready != (code == 0) {
		p.t.Errorf("check %q: ready %v, exit %d", args, v.Ready, code)
	}
	return code, reasons, out
}

// TestCheckCleanExportedRun: a run answered and exported whole is ready
// (exit 0), every dataset and all; its text fits 80 columns. The token-id
// prompts of B1_ids make ids records (as conversations every answer is
// excluded: not ready, all_excluded, with the way to ids records).
func TestCheckCleanExportedRun(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "64", "--export", "conversations", "demo/B2_text", "demo/B3_chat", "demo/B4_sharegpt")
	p.mustRun("--db", "conv.db", "gen", "--server", "sim", "--max-new-tokens", "64", "--export", "conversations", "--out", "conv", "demo/B1_ids")
	code, reasons, out := p.checkJSON("--db", "conv.db", "conv/B1_ids")
	if code != 1 || reasons["B1_ids"][query.ReasonAllExcluded] != 50 {
		t.Errorf("check of token-id prompts exported as conversations: exit %d, want 1 and all 50 answers excluded\n%s", code, out)
	}
	if _, out, _ := p.check("--db", "conv.db", "conv/B1_ids"); !strings.Contains(out, "gendex export --format ids") {
		t.Errorf("check does not say how to make ids records:\n%s", out)
	}
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "64", "--export", "ids", "demo/B1_ids")
	code, out, errOut := p.check("--allow-simulated", "demo")
	if code != 0 || !strings.Contains(out, "all: ready (4 datasets)") || !strings.Contains(out, "B3_chat: ready") {
		t.Fatalf("check of a clean exported run: exit %d, want 0 and every dataset ready\n%s%s", code, out, errOut)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 80 {
			t.Errorf("a line over 80 columns: %q", l)
		}
	}
	if code, reasons, out := p.checkJSON("--allow-simulated", "demo"); code != 0 || len(reasons) != 4 {
		t.Errorf("check --format json: exit %d, %d datasets, want 0 and 4\n%s", code, len(reasons), out)
	}
}

// TestCheckNamesWhatIsOwed: records missing, records stale after a redo,
// and records beyond --max-length each make check exit 1, naming the
// dataset, the reason and its count; a folder the index does not hold is
// "not there" (3), a --max-length that is not a positive integer a usage
// error (2).
func TestCheckNamesWhatIsOwed(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	ds := filepath.Join("demo", "B2_text")
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "64", ds)
	code, out, _ := p.check(ds)
	if code != 1 || !strings.Contains(out, "B2_text: NOT READY") || !strings.Contains(out, "no_record 50: answers without a record") ||
		!strings.Contains(out, "fix: gendex export "+filepath.Join(p.dir, ds)) || !strings.Contains(out, "all: NOT READY (1 dataset)") {
		t.Errorf("check of a run not exported: exit %d, want 1 naming B2_text's 50 answers without a record and export\n%s", code, out)
	}
	p.mustRun("export", ds)
	if code, out, _ := p.check("--allow-simulated", ds); code != 0 {
		t.Fatalf("check after export: exit %d, want 0\n%s", code, out)
	}
	redo := filepath.Join(p.dir, "redo.txt")
	os.WriteFile(redo, []byte("B2_text-00001\nB2_text-00002\nB2_text-00003\n"), 0o644)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "64", "--redo", redo, ds)
	code, reasons, out := p.checkJSON(ds)
	if code != 1 || reasons["B2_text"]["stale_record"] != 3 {
		t.Errorf("check after a redo of 3 answers, not exported: exit %d, want 1 and stale_record 3\n%s", code, out)
	}
	p.mustRun("export", ds)
	code, reasons, out = p.checkJSON("--max-length", "40", ds)
	if n := reasons["B2_text"]["over_max_length"]; code != 1 || n <= 0 || n >= 50 || reasons["B2_text"]["over_max_length.tokens"] <= 40*n {
		t.Errorf("check --max-length 40: exit %d, want 1 and some records over it with their tokens\n%s", code, out)
	}
	if code, out, _ := p.check("--allow-simulated", "--max-length", "100000", ds); code != 0 {
		t.Errorf("check --max-length 100000: exit %d, want 0\n%s", code, out)
	}
	os.MkdirAll(filepath.Join(p.dir, "elsewhere"), 0o755)
	if code, _, errOut := p.check("elsewhere"); code != 3 || !strings.Contains(errOut, "holds no dataset with files under") {
		t.Errorf("check of a folder the index does not hold: exit %d, want 3\n%s", code, errOut)
	}
	for _, bad := range []string{"0", "-5", "ten"} {
		if code, _, errOut := p.check("--max-length", bad, ds); code != 2 || !strings.Contains(errOut, "--max-length") {
			t.Errorf("check --max-length %s: exit %d, want 2\n%s", bad, code, errOut)
		}
	}
}

// TestCheckInWebView: the run page shows check's verdicts: a dataset not
// exported is not ready, with the reason and its fix.
func TestCheckInWebView(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "64", filepath.Join("demo", "B2_text"))
	base, _ := startWeb(t, p, []string{"GENDEX_TOKEN=t0ken"})
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base, nil)
	req.Header.Set("Authorization", "Bearer t0ken")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	_, section, _ := strings.Cut(string(body), `<section id="check">`)
	section, _, _ = strings.Cut(section, "</section>")
	for _, want := range []string{"B2_text", "no_record", "answers without a record", "gendex export " + filepath.Join(p.dir, "demo", "B2_text")} {
		if !strings.Contains(section, want) {
			t.Errorf("the run page's check section lacks %q:\n%s", want, section)
		}
	}
}
