package gen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gendex/ingest/gen/sim"
	"gendex/store"
)

// cutSet writes root/R: n prompts of ~1 KB (over skipMin: the feeder
// starts past the answers and a sweeper reads the lines before), and
// answers to the first answered of them: every other one cut at 2 tokens
// (finish_reason length), but each tenth of those cut at 64 (this redo's
// limit) and each tenth + 3 a redo's already, at 64. It returns the
// prompt numbers the redo must ask again.
func cutSet(t *testing.T, root string, n, answered int) map[int]bool {
	t.Helper()
	dir := filepath.Join(root, "R")
	os.MkdirAll(dir, 0o755)
	var p, raw bytes.Buffer
	pad := strings.Repeat("x", 1000)
	again := map[int]bool{}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&p, `{"id":"R-%05d","text":"write about %d %s"}`+"\n", i, i, pad)
		if i > answered {
			continue
		}
		finish, tokens, redo := "stop", 2, ""
		if i%2 == 1 {
			finish = "length"
			switch i % 10 {
			case 1:
				tokens = 64
			case 3:
				tokens, redo = 5, `,"redo":true,"max_new_tokens":64`
			default:
				again[i] = true
			}
		}
		fmt.Fprintf(&raw, `{"id":"R-%05d","text":"ok","completion_tokens":%d,"finish_reason":%q,"finished_at":"2026-12-01T10:00:00Z","model":"sim-model","simulated":true%s}`+"\n", i, tokens, finish, redo)
	}
	if p.Len() < skipMin {
		t.Fatalf("prompts file of %d bytes: under skipMin, nothing is skipped", p.Len())
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), p.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), raw.Bytes(), 0o644)
	return again
}

var promptNumber = regexp.MustCompile(`write about (\d+) `)

// TestRedoTruncatedAsItGoes: --redo truncated over a set larger than
// RedoUpfront decides each answer as the feeder reads its prompt: its
// first request asking a cut answer again goes out while the index holds
// only some of the redo's marks (before, every answer was decided and
// marked before the first request), and while it does, what is to go is
// not known (Pending.Choosing; the run's row has no to_go). Interrupted
// and started again, the redo asks each cut answer below its limit once,
// none cut at the limit or redone already, and the prompts without an
// answer; once every prompt is read it says its counts, and the index
// owes nothing.
func TestRedoTruncatedAsItGoes(t *testing.T) {
	t.Parallel()
	const n, answered = 4100, 4000 // the prompts file just over skipMin
	root := t.TempDir()
	again := cutSet(t, root, n, answered)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	db := openDB(t, dbPath)
	defer db.Close()

	var mu sync.Mutex
	asked := map[int]int{}
	firstRedo := store.Pending{Asking: ^uint64(0)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := sim.New(sim.Config{Seed: 1}).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if m := promptNumber.FindSubmatch(body); m != nil {
			i, _ := strconv.Atoi(string(m[1]))
			mu.Lock()
			asked[i]++
			redone := 0
			for j := range asked {
				if j <= answered {
					redone++
				}
			}
			if i <= answered && redone == 1 {
				db.View(func(v *store.View) error {
					s, err := v.Summary("R")
					firstRedo = s.Pending
					return err
				})
			}
			if redone == 300 {
				cancel() // the first run stops here
			}
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	sets, err := FindDatasets([]string{root}, "")
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context) (*Summary, string, error) {
		var log syncBuffer
		cfg := Config{Servers: []string{hs.URL}, Concurrency: 4, Sampling: maxNew(64), Redo: &Redo{Truncated: true}, RedoUpfront: 100, Log: &log, LogEvery: 1 << 40}
		sum, err := Run(ctx, db, cfg, sets)
		return sum, log.String(), err
	}
	pending := func() store.Pending {
		var p store.Pending
		db.View(func(v *store.View) error { s, err := v.Summary("R"); p = s.Pending; return err })
		return p
	}

	_, log, err := run(ctx)
	if err == nil {
		t.Fatalf("the first run was not interrupted\n%s", log)
	}
	if !firstRedo.Choosing || firstRedo.Asking >= uint64(len(again)) {
		t.Errorf("at the first answer asked again the index held %+v: want choosing, fewer marks than the %d answers to ask again (decided before the first request)", firstRedo, len(again))
	}
	if p := pending(); !p.Choosing || !strings.Contains(log, "the redo stopped before it had read every prompt") || !strings.Contains(log, "unknown to go") {
		t.Errorf("interrupted while choosing: index %+v, want choosing; the summary must say the redo's work is not known\n%s", p, log)
	}

	redone := 0 // by the first run
	for id, l := range outputLines(t, filepath.Join(root, "R", "raw_responses.jsonl")) {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "R-"))
		if again[i] && len(l) == 2 {
			redone++
		}
	}
	sum, log, err := run(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := fmt.Sprintf("every prompt read: %d of the answers cut at the token limit are asked again", len(again)-redone)
	if !strings.Contains(log, want) || !strings.Contains(log, "cut at this run's --max-new-tokens 64 or more") || !strings.Contains(log, "answered again already") {
		t.Errorf("the redo's counts: want %q and why not the others\n%s", want, log)
	}
	if p := pending(); p != (store.Pending{}) {
		t.Errorf("after the redo the index holds %+v; want nothing owed", p)
	}
	lines := outputLines(t, filepath.Join(root, "R", "raw_responses.jsonl"))
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("R-%05d", i)
		want := 1
		if again[i] {
			want = 2
		}
		if got := len(lines[id]); got != want {
			t.Errorf("%s: %d answer lines; want %d (cut below the limit: %v)", id, got, want, again[i])
		}
	}
	if sum.Responses == 0 {
		t.Errorf("the second run answered nothing\n%s", log)
	}
}

// TestRedoKeepsPromptsOwnLimit: a prompt line's own max_new_tokens wins
// over --max-new-tokens, so --redo truncated --max-new-tokens 64 leaves an
// answer cut at its prompt's own limit (asked again, it would be cut the
// same), says so, and asks again one cut below it, its redo line naming
// the limit it was asked with (the prompt's, else the run's). Deciding
// first or as the feeder goes. Before, every cut answer was asked again
// and each redo line said 64.
func TestRedoKeepsPromptsOwnLimit(t *testing.T) {
	t.Parallel()
	for _, upfront := range []uint64{1000, 0} {
		t.Run(fmt.Sprint("upfront=", upfront), func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "L")
			os.MkdirAll(dir, 0o755)
			var p, raw bytes.Buffer
			want := map[string]string{} // id -> the limit its redo line says
			for i := 1; i <= 40; i++ {
				own := ""
				switch i % 4 {
				case 1:
					own = `,"max_new_tokens":4` // cut at its own limit: left
				case 3:
					own, want[fmt.Sprintf("L-%02d", i)] = `,"sampling_params":{"max_new_tokens":16}`, "16"
				default:
					want[fmt.Sprintf("L-%02d", i)] = "64"
				}
				fmt.Fprintf(&p, `{"id":"L-%02d","text":"write about %d"%s}`+"\n", i, i, own)
				fmt.Fprintf(&raw, `{"id":"L-%02d","text":"ok","completion_tokens":4,"finish_reason":"length","model":"sim-model","simulated":true}`+"\n", i)
			}
			os.WriteFile(filepath.Join(dir, "prompts.jsonl"), p.Bytes(), 0o644)
			os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), raw.Bytes(), 0o644)
			_, url := simServer(t, sim.Config{Seed: 1})
			cfg := Config{Servers: []string{url}, Concurrency: 4, Sampling: maxNew(64), Redo: &Redo{Truncated: true}, RedoUpfront: upfront}
			_, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), cfg, root)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			got := map[string]string{}
			for _, l := range readJSONL(t, filepath.Join(dir, "raw_responses.jsonl"))[40:] {
				m := decodeMap(t, l)
				got[fmt.Sprint(m["id"])] = fmt.Sprint(m["max_new_tokens"])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("asked again, with the limit each redo line says: %v\nwant %v\n%s", got, want, log)
			}
			if !strings.Contains(log, "10 cut at their prompt lines' own max_new_tokens or more") {
				t.Errorf("the redo does not say why 10 cut answers are left\n%s", log)
			}
		})
	}
}
