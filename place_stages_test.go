package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A dataset's answers are its raw_responses*, errors* and turns* files,
// and they live in one folder (README, "What counts as answered";
// ingest.PlaceKind). These tests hold that for each of the three stages,
// on both sides: the index holds answers of one stage in a/ds, and files
// of any answer stage in a second folder b/ds are refused by every writer.

// answerStage is one answer stage: the file the index holds in a/ds, the
// file of that stage in the second folder b/ds, and a line of it.
type answerStage struct {
	name, held, second, line string
}

var answerStages = []answerStage{
	{"raw_responses", "raw_responses.jsonl", "raw_responses_node2.jsonl", `{"id":"p1","completion_tokens":1}`},
	{"errors", "errors.jsonl", "errors_node2.jsonl", `{"id":"p1","status":503,"error":"Service Unavailable"}`},
	{"turns", "turns.jsonl", "turns_node2.jsonl", `{"id":"p2","turn":1,"turns":2,"text":"t","prompt_tokens":4,"completion_tokens":3,"finish_reason":"stop"}`},
}

// placedAnswers makes a/ds (two prompts and held's file), indexes it, and
// returns the index and both folders a and b (b/ds not made yet).
func placedAnswers(t *testing.T, held answerStage) (db, a, b string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir()) // the spelling gendex stores
	if err != nil {
		t.Fatal(err)
	}
	db, a, b = filepath.Join(dir, "g.db"), filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeTestFile(t, filepath.Join(a, "ds", "prompts.jsonl"), `{"id":"p1","text":"a"}`+"\n"+`{"id":"p2","text":"b"}`+"\n")
	writeTestFile(t, filepath.Join(a, "ds", held.held), held.line+"\n")
	mustGendex(t, testEnv(nil), "--db", db, "ingest", a)
	return db, a, b
}

// checkNothingOf fails the test if the index at db holds a file of dir.
func checkNothingOf(t *testing.T, db, dir, after string) {
	t.Helper()
	files := mustGendex(t, testEnv(nil), "--db", db, "query", "files", "--format", "csv").stdout
	if strings.Contains(files, dir+string(filepath.Separator)) {
		t.Errorf("after %s, the index holds files of %s:\n%s", after, dir, files)
	}
}

// TestEveryAnswerStageKeepsItsPlace: with the index holding answers of
// any one stage in a/ds, a file of any answer stage in b/ds is refused by
// each writer, each on an index of its own: ingest (naming both folders),
// gen writing its answers to b (which writes none), and export of b's
// answers (which writes no record); none of b's files is indexed.
func TestEveryAnswerStageKeepsItsPlace(t *testing.T) {
	t.Parallel()
	// setup makes a/ds (placedAnswers) and b/ds's file of stage second;
	// with raw, also a raw_responses* file there (export reads a folder's
	// answers when it holds one).
	setup := func(t *testing.T, held, second answerStage, raw bool) (db, a, bds string) {
		db, a, b := placedAnswers(t, held)
		bds = filepath.Join(b, "ds")
		writeTestFile(t, filepath.Join(bds, second.second), second.line+"\n")
		if raw && second.name != "raw_responses" {
			writeTestFile(t, filepath.Join(bds, answerStages[0].second), answerStages[0].line+"\n")
		}
		return db, a, bds
	}
	for _, held := range answerStages {
		for _, second := range answerStages {
			name := held.name + " held, " + second.name + " second"
			t.Run(name+", ingest", func(t *testing.T) {
				db, a, bds := setup(t, held, second, false)
				r := gendex(t, testEnv(nil), "--db", db, "ingest", filepath.Dir(bds))
				if r.code != 1 || !strings.Contains(r.stderr, "two folders with one dataset name never merge") ||
					!strings.Contains(r.stderr, "answers from "+filepath.Join(a, "ds")+", and from "+bds) {
					t.Errorf("ingest of %s beside %s held in a/ds: want exit 1, naming both folders; %s", second.second, held.held, r)
				}
				checkNothingOf(t, db, bds, "ingest")
			})
			t.Run(name+", gen", func(t *testing.T) {
				db, a, bds := setup(t, held, second, false)
				r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--out", filepath.Dir(bds), a)
				if r.code != 1 || !strings.Contains(r.stderr, "answers in one folder never stand in for another's") ||
					!strings.Contains(r.stderr, "writes its answers to "+bds) {
					t.Errorf("gen --out b (holding %s) beside %s held in a/ds: want exit 1, refused; %s", second.second, held.held, r)
				}
				if _, err := os.Stat(filepath.Join(bds, "raw_responses.jsonl")); err == nil {
					t.Errorf("the refused gen wrote answers in %s", bds)
				}
				checkNothingOf(t, db, bds, "gen")
			})
			t.Run(name+", export", func(t *testing.T) {
				db, a, bds := setup(t, held, second, true)
				for _, format := range []string{"conversations", "ids"} {
					r := gendex(t, testEnv(nil), "--db", db, "export", "--format", format, filepath.Dir(bds))
					if r.code != 1 || !strings.Contains(r.stderr, "counts its answers in "+filepath.Join(a, "ds")+", not the ones in "+bds) {
						t.Errorf("export --format %s of b (holding %s) beside %s held in a/ds: want exit 1, naming both folders; %s", format, second.second, held.held, r)
					}
				}
				if out, _ := filepath.Glob(filepath.Join(bds, "[te]x*.jsonl")); len(out) > 0 {
					t.Errorf("the refused export wrote %v", out)
				}
				checkNothingOf(t, db, bds, "export")
			})
		}
	}
}

// TestFollowKeepsEachAnswerStageInPlace: an ingest --follow of b, when a
// file of any answer stage appears in b/ds while the index holds answers
// of any one stage in a/ds, warns naming both folders, goes on, and never
// indexes it.
func TestFollowKeepsEachAnswerStageInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the follow loop; skipped with -short")
	}
	t.Parallel()
	for _, held := range answerStages {
		for _, second := range answerStages {
			t.Run(held.name+" held, "+second.name+" second", func(t *testing.T) {
				t.Parallel()
				db, a, b := placedAnswers(t, held)
				writeTestFile(t, filepath.Join(b, "other", "prompts.jsonl"), `{"id":"o1","text":"c"}`+"\n")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				stderr := &lockedBuffer{}
				env := testEnv(nil)
				env.Stderr = stderr
				done := make(chan error, 1)
				go func() { done <- run(ctx, env, []string{"--db", db, "ingest", "--follow", b}) }()
				waitFor(t, 10*time.Second, "ingest --follow started", func() bool { return strings.Contains(stderr.String(), "following") })

				bds := filepath.Join(b, "ds")
				writeTestFile(t, filepath.Join(bds, second.second), second.line+"\n")
				want := "answers from " + filepath.Join(a, "ds") + ", and from " + bds
				for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), want); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						cancel()
						<-done
						t.Fatalf("%s appeared in b/ds beside %s held in a/ds: ingest --follow did not say %q in 10 s:\n%s", second.second, held.held, want, stderr.String())
					}
				}
				time.Sleep(300 * time.Millisecond) // a pass of the follow loop after the warning
				cancel()
				select {
				case err := <-done:
					if code := exitCode(stderr, err); code != 0 {
						t.Errorf("ingest --follow ended with exit %d: %v\n%s", code, err, stderr.String())
					}
				case <-time.After(10 * time.Second):
					t.Fatal("ingest --follow did not stop after the interrupt")
				}
				checkNothingOf(t, db, bds, "ingest --follow")
			})
		}
	}
}
