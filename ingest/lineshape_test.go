package ingest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gendex/store"
)

// readAsAny reads line as the table's last row reads every line, with no
// look at its keys first: what the table's reading must equal.
func readAsAny(line []byte, stage store.Stage, rec *store.Record) (store.Stage, lineInfo, error) {
	var info lineInfo
	var f fields
	*rec = store.Record{PromptTokens: store.Unknown, CompletionTokens: store.Unknown, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown}
	top, at, err := readTop(line, &f, nil)
	if err == ErrNotObject && stage == store.Raw {
		top, at, err = readOnly(line, &f, nil)
	}
	if err != nil {
		return stage, info, err
	}
	st, err := readAny(line, top, at, stage, nil, rec, &f, &info, false)
	if err == nil && (st == store.Raw || st == store.Turns) {
		rec.Finish = answerFinish(rec.Finish)
	}
	return st, info, err
}

// allStages are the stages a line may be read as.
var allStages = []store.Stage{store.Raw, store.Turns, store.Prompts, store.Tokenized, store.Errors, store.Excluded}

// sameAsAny fails t when the table reads line (of stage) otherwise than
// readAny alone does.
func sameAsAny(t testing.TB, line []byte, stage store.Stage) {
	t.Helper()
	var got, want store.Record
	st, info, err := normalize(line, stage, nil, &got)
	wst, winfo, werr := readAsAny(line, stage, &want)
	if st != wst || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(info, winfo) || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		var f fields
		_, _, _ = readTop(line, &f, nil)
		t.Fatalf("stage %v, row %d: the table reads %.300q as\n%v %+v %+v %v\nreadAny as\n%v %+v %+v %v",
			stage, kindOf(line, &f, stage, nil), line, st, got, info, err, wst, want, winfo, werr)
	}
}

// TestLineShapes holds each row of the table of line shapes to its
// example: the rule picks the row, and the row reads it as readAny would.
func TestLineShapes(t *testing.T) {
	t.Parallel()
	for k, row := range lineShapes {
		line := []byte(row.example)
		var f fields
		if _, _, err := readTop(line, &f, nil); err != nil {
			t.Fatalf("row %d's example: %v", k, err)
		}
		if got := kindOf(line, &f, row.stage, nil); got != lineKind(k) {
			t.Errorf("row %d (%s): its example is read by row %d", k, row.name, got)
		}
		sameAsAny(t, line, row.stage)
	}
}

// TestLineShapesReadAsAny reads every line of every JSONL file of the
// repository's test data, and of the shared real-world samples when they
// are there, through the table and through readAny alone, as a line of
// each stage: the same record, stage and error each time.
func TestLineShapesReadAsAny(t *testing.T) {
	t.Parallel()
	var files []string
	for _, root := range []string{"..", realworld} {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 20 {
		t.Fatalf("only %d JSONL files found", len(files))
	}
	lines := 0
	for _, p := range files {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
		for sc.Scan() {
			line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
			for _, st := range allStages {
				sameAsAny(t, line, st)
			}
			lines++
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	// gen's own lines as they are written now, with what later changes
	// added to them (a tool conversation's stop, the answer's provenance),
	// so the flat row keeps reading every key readAny reads.
	for _, line := range []string{
		`{"id":"t1","output_ids":[1,2],"text":"a","finish_reason":"stop","completion_tokens":2,"prompt_tokens":5,"finished_at":"2026-12-05T10:00:00Z","model":"m","tool_stop":{"reason":"other_tool","step":1,"detail":"x"}}`,
		`{"id":"t2","text":"b","finish_reason":"length","completion_tokens":3,"prompt_tokens":5,"finished_at":"2026-12-05T10:00:01Z","model":"m","simulated":true,"provenance":{"sampling":{"temperature":0.7},"server":{"model":"m"}}}`,
		`{"id":"t3","text":"c","finish_reason":"stop","completion_tokens":1,"finished_at":"2026-12-05T10:00:02Z","redo":true,"redo_tag":"r1","tool_stop":{"step":2}}`,
	} {
		for _, st := range allStages {
			sameAsAny(t, []byte(line), st)
		}
	}
	t.Logf("%d lines of %d files", lines, len(files))
}

// FuzzLineShapes holds the table to readAny on any line.
func FuzzLineShapes(f *testing.F) {
	for _, row := range lineShapes {
		f.Add([]byte(row.example))
	}
	f.Add([]byte(`{"id":"a","completion_tokens":"x","output_ids":null,"done":true,"eval_count":2}`))
	f.Add([]byte(`{"id":"","completion_tokens":1}`))
	f.Add([]byte(`{"id":3,"completion_tokens":0,"code":500,"message":"down"}`))
	f.Add([]byte(`{"id":"a","turn":2,"output_ids":[1,2],"created":1700000000,"spec_verify_ct":2}`))
	f.Add([]byte(`{"generated_text":"x","details":{"generated_tokens":1,"finish_reason":"eos_token"}}`))
	f.Add([]byte(`{"text":"x","finish_reason":"stop"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, st := range allStages {
			sameAsAny(t, line, st)
		}
	})
}
