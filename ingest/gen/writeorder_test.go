package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// eachLine calls fn with each line of a JSONL file decoded into a fresh
// T (nothing when the file does not exist).
func eachLine[T any](t *testing.T, path string, fn func(T)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		var l T
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: %v in %q", path, err, line)
		}
		fn(l)
	}
}

// idsIn reads the ids of a JSONL file's lines ({} when it does not exist).
func idsIn(t *testing.T, path string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	eachLine(t, path, func(l struct{ ID string }) { ids[l.ID] = true })
	return ids
}

// turnLinesIn counts the turn lines of each id in a turns.jsonl.
func turnLinesIn(t *testing.T, path string) map[string]int {
	t.Helper()
	n := map[string]int{}
	eachLine(t, path, func(l struct{ ID string }) { n[l.ID]++ })
	return n
}

// askedTurn is a turn of a conversation's answer line: {"asked":false}
// when it was never asked.
type askedTurn struct {
	Asked *bool `json:"asked"`
}

// askedTurnsIn reads a raw_responses.jsonl of conversations: how many
// turns each asked (its turns but the {"asked":false} ones).
func askedTurnsIn(t *testing.T, path string) map[string]int {
	t.Helper()
	n := map[string]int{}
	eachLine(t, path, func(l struct {
		ID    string
		Turns []askedTurn
	}) {
		for _, turn := range l.Turns {
			if turn.Asked == nil || *turn.Asked {
				n[l.ID]++
			}
		}
	})
	return n
}

// TestRecordNeverBeforeItsAnswer: README's "a record never reaches the
// disk before its answer", checked at every point a crash could leave the
// files: after each fsync of gen --export's flushes (the seam afterSync),
// every record and exclusion on disk has its answer on disk (single
// answers, and conversations asked turn by turn, whose answer line never
// reaches the disk before their earlier turns' lines). Then a fault injected right
// after the first fsync of a flush (the answers written, their records
// not yet) stops the run, as a crash there would; the next run leaves
// exactly one record or exclusion per answer.
//
// Not parallel: it sets the package's afterSync, which every run reads.
func TestRecordNeverBeforeItsAnswer(t *testing.T) {
	for _, shape := range []string{"text", "conversations"} {
		t.Run(shape, func(t *testing.T) {
			_, url := simServer(t, sim.Config{Seed: 1})
			root := t.TempDir()
			const n = 60
			if shape == "conversations" {
				writeCutConversations(t, root, "W", n, 3, func(int) bool { return false })
			} else {
				writePrompts(t, root, "W", "text", n)
			}
			out := t.TempDir()
			dir := filepath.Join(out, "W")
			raw := filepath.Join(dir, "raw_responses.jsonl")
			tok, exc := filepath.Join(dir, "tokenized.jsonl"), filepath.Join(dir, "excluded.jsonl")
			syncs, faultAt, faulted := 0, 0, false
			var order []string
			turnsFile := filepath.Join(dir, "turns.jsonl")
			afterSync = func(path string) error {
				syncs++
				order = append(order, filepath.Base(path))
				answers := idsIn(t, raw)
				if shape == "conversations" {
					// A conversation's answer never before its earlier
					// turns: each turn it answered but its last has its
					// line in turns.jsonl (a conversation cut at turn i
					// asked i turns).
					turns := turnLinesIn(t, turnsFile)
					for id, asked := range askedTurnsIn(t, raw) {
						if turns[id] != asked-1 {
							t.Errorf("after fsync %d (%s): %s holds %s, which asked %d turns, with %d of its %d earlier turns in turns.jsonl (fsyncs so far: %v)",
								syncs, filepath.Base(path), filepath.Base(raw), id, asked, turns[id], asked-1, order)
						}
					}
				}
				for _, f := range []string{tok, exc} {
					for id := range idsIn(t, f) {
						if !answers[id] {
							t.Errorf("after fsync %d (%s): %s holds %s, whose answer is not in %s yet (fsyncs so far: %v)",
								syncs, filepath.Base(path), filepath.Base(f), id, filepath.Base(raw), order)
						}
					}
				}
				// The fault: once answers are on disk, right after a
				// flush's first fsync.
				if faultAt == 0 && len(answers) > 0 {
					faultAt = syncs + 1
				}
				if syncs == faultAt && !faulted {
					faulted = true
					return fmt.Errorf("injected fault after fsync %d of %s", syncs, filepath.Base(path))
				}
				return nil
			}
			t.Cleanup(func() { afterSync = nil })
			maxNew := 8
			cfg := Config{Servers: []string{url}, Out: out, Concurrency: 4, Sampling: client.SamplingParams{MaxNewTokens: &maxNew},
				Export: &export.Config{Format: export.Conversations}}
			dbPath := filepath.Join(t.TempDir(), "g.db")
			_, log, err := runGen(t, t.Context(), dbPath, cfg, root)
			if !faulted || err == nil || !strings.Contains(err.Error(), "injected fault") {
				t.Fatalf("the run went on past the injected fault (faulted %v): %v\n%s", faulted, err, log)
			}
			// The next run, without the fault, finishes the job: one
			// record or exclusion per answer, never one without.
			afterSync = nil
			sum, log, err := runGen(t, t.Context(), dbPath, cfg, root)
			if err != nil {
				t.Fatalf("the run after the fault: %v\n%s", err, log)
			}
			answers, records, excluded := idsIn(t, raw), idsIn(t, tok), idsIn(t, exc)
			if len(answers) != n {
				t.Errorf("%d answers after the second run, want %d (%+v)", len(answers), n, sum)
			}
			for id := range answers {
				if records[id] == excluded[id] {
					t.Errorf("answer %s: record %v, exclusion %v; want exactly one", id, records[id], excluded[id])
				}
			}
			for id := range records {
				if !answers[id] {
					t.Errorf("record %s without an answer", id)
				}
			}
		})
	}
}
