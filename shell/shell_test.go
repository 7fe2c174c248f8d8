package shell

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

func fixtureDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ingesttest.IndexInto(t, db, "../testdata/shapes")
	return db
}

// TestScript: off a terminal the shell reads commands line by line, with
// no prompt, prints what `gendex query` prints (a line copied from
// `gendex query ...` too), and fails if a command did.
func TestScript(t *testing.T) {
	db := fixtureDB(t)
	now := time.Now()
	var out, errs strings.Builder
	sh := &Shell{Ask: query.Local{Src: db}, In: strings.NewReader("progress\n\n# a comment\nformat json\nquery tokens demo\nbogus\nmissing demo --format tsv --no-header\nquit\nprogress\n"),
		Out: &out, Err: &errs, Now: func() time.Time { return now }}
	err := sh.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "1 commands failed") {
		t.Errorf("Run = %v; want the failed command counted", err)
	}
	if !strings.Contains(errs.String(), `unknown question "bogus"`) {
		t.Errorf("stderr: %q", errs.String())
	}
	// The same answers as query, in the same formats.
	want := func(args ...string) string {
		q, _ := query.Parse(args)
		var b strings.Builder
		r, err := query.Answer(db, q, now)
		if err != nil {
			t.Fatal(err)
		}
		f := q.Format
		if f == query.Auto {
			f = query.TSV
		}
		q.Format = f
		q.Resolve(false)
		if q.Bare {
			r, _ = answerBare(db, q, now)
		}
		format.Write(&b, r, format.Options{Format: f, NoHeader: q.NoHeader})
		return b.String()
	}
	expect := want("progress") + want("tokens", "demo", "--format", "json") + want("missing", "demo", "--format", "tsv", "--no-header")
	if out.String() != expect {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), expect)
	}
	if strings.Contains(out.String(), "gendex>") {
		t.Error("a prompt was printed off a terminal")
	}
}

func answerBare(db *store.DB, q query.Query, now time.Time) (*query.Result, error) {
	var c query.Collect
	err := query.Run(db, q, now, &c)
	return &c.Result, err
}

func TestComplete(t *testing.T) {
	sh := &Shell{Ask: query.Local{Src: fixtureDB(t)}, Now: time.Now}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"pro", []string{"progress "}},
		{"w", []string{"watch "}},
		{"tokens d", []string{"datatrove ", "demo "}},
		{"tokens de", []string{"demo "}},
		{"missing demo --st", []string{"--stage "}},
		{"missing demo --stage t", []string{"tokenized "}},
		{"missing demo --stage ", []string{"raw ", "tokenized "}},
		// show takes every stage, the turns and exclusions among them.
		{"show demo x --stage t", []string{"tokenized ", "turns "}},
		{"show demo x --stage e", []string{"errors ", "excluded "}},
		{"throughput --window ", []string{"30s ", "5m ", "1h "}},
		{"format j", []string{"json "}},
		{"watch 2 pr", []string{"progress "}},
	} {
		head, got, tail := sh.complete(tc.line, len(tc.line))
		if !slices.Equal(got, tc.want) || !strings.HasPrefix(tc.line, head) || tail != "" {
			t.Errorf("complete(%q) = %q, %q, %q; want completions %q", tc.line, head, got, tail, tc.want)
		}
	}
}

func TestSplit(t *testing.T) {
	got, err := split(`show demo "id with spaces" 'x'`)
	if err != nil || !slices.Equal(got, []string{"show", "demo", "id with spaces", "x"}) {
		t.Errorf("split = %q, %v", got, err)
	}
	if _, err := split(`show "unclosed`); err == nil {
		t.Error("an unclosed quote was accepted")
	}
}
