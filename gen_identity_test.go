package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGenServerChangesIdentityMidRun: a `gendex sim` process serving
// model-one is SIGKILLed mid-run and started again on the same port
// serving model-two. gen reads it again when it is back, records an
// "identity" event naming both models, sends it nothing more (every
// answer is model-one's) and, as it was the only server, exits non-zero
// naming --allow-mixed; no prompt is answered twice. With --allow-mixed the
// same change is recorded and the run finishes, every prompt answered once.
func TestGenServerChangesIdentityMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a real simulator process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-mixed=%v", mixed), func(t *testing.T) {
			t.Parallel()
			addr := freeAddr(t)
			url := "http://" + addr
			sim := func(model string) *gendexProc {
				return startSimAt(t, bin, addr, "--unmarked", "--seed", "43", "--decode-tps", "40", "--model", model)
			}
			server := sim("model-one")
			const n = 16
			root := t.TempDir()
			dir := filepath.Join(root, "I")
			writeTopicPrompts(t, dir, "I", n)
			raw := filepath.Join(dir, "raw_responses.jsonl")
			db := filepath.Join(t.TempDir(), "g.db")
			args := []string{"--server", url, "--concurrency", "4", "--max-new-tokens", "20", "--ignore-eos", "--down-limit", "1m"}
			if mixed {
				args = append(args, "--allow-mixed")
			}
			gen := startGendex(t, bin, "", append(append([]string{"--db", db, "gen"}, args...), root)...)
			// 20 tokens at 40 tokens/s: half a second each, 4 at a time.
			waitFor(t, 30*time.Second, "the first answers written", func() bool {
				data, _ := os.ReadFile(raw)
				return strings.Count(string(data), "\n") >= 4
			})
			server.Kill()
			time.Sleep(300 * time.Millisecond)
			sim("model-two")

			select {
			case <-gen.Done():
			case <-time.After(2 * time.Minute):
				gen.Kill()
				t.Fatalf("gen still runs 2 minutes after the restart:\n%s", gen.Stderr())
			}
			log := gen.Stderr()

			answers, byModel := answersByModel(t, raw)
			for id, k := range answers {
				if k != 1 {
					t.Errorf("%s: %d answers; want at most 1", id, k)
				}
			}
			identity := identityEvent(t, bin, db)
			if !strings.Contains(identity, "model-one") || !strings.Contains(identity, "model-two") {
				t.Errorf("identity event %q; want one naming model-one and model-two\n%s", identity, log)
			}
			if !strings.Contains(log, "came back as another server") {
				t.Errorf("gen does not say the server came back as another:\n%s", log)
			}

			if mixed {
				if code := gen.Wait(); code != 0 {
					t.Fatalf("gen --allow-mixed: exit %d\n%s", code, log)
				}
				if len(answers) != n || byModel["model-two"] == 0 {
					t.Errorf("--allow-mixed: %d prompts answered, by model %v; want all %d, some by model-two\n%s", len(answers), byModel, n, log)
				}
				return
			}
			if code := gen.Wait(); code != 1 {
				t.Fatalf("gen exited %d after its only server came back with another model; want 1\n%s", code, log)
			}
			if byModel["model-two"] != 0 || len(answers) == n {
				t.Errorf("answers by model %v (%d of %d prompts); want model-one's only, the run stopped at the change\n%s", byModel, len(answers), n, log)
			}
			if !strings.Contains(log, "--allow-mixed") || !strings.Contains(log, "came back as another server") {
				t.Errorf("gen's reason does not name the change and --allow-mixed:\n%s", log)
			}
		})
	}
}

// answersByModel reads an answer file: each id's answers, and the answers
// by the model their provenance names.
func answersByModel(t *testing.T, raw string) (answers, byModel map[string]int) {
	t.Helper()
	answers, byModel = map[string]int{}, map[string]int{}
	f, err := os.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l struct {
			ID         string
			Provenance struct {
				Server struct{ Model string }
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad answer line %q: %v", sc.Text(), err)
		}
		answers[l.ID]++
		byModel[l.Provenance.Server.Model]++
	}
	return answers, byModel
}

// identityEvent is the detail of the last identity event in db, with its
// server: "SERVER: DETAIL".
func identityEvent(t *testing.T, bin, db string) string {
	t.Helper()
	evs, err := queryJSON[eventRow](t, bin, db, "events")
	if err != nil {
		t.Fatal(err)
	}
	var identity string
	for _, e := range evs {
		if e.Event == "identity" && e.Detail != nil && e.Server != nil {
			identity = *e.Server + ": " + *e.Detail
		}
	}
	return identity
}

// TestGenRetiresOneServerOfTwo: of two `gendex sim` processes serving
// model-one, one is SIGKILLed mid-run and started again on its port
// serving model-two. gen records an identity event for that server and
// sends it nothing more; the other answers the rest: gen exits 0, every
// prompt answered once, every answer model-one's.
func TestGenRetiresOneServerOfTwo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and kills a real simulator process")
	}
	bin := gendexBinary(t)
	addr := freeAddr(t)
	sim := func(model string) *gendexProc {
		return startSimAt(t, bin, addr, "--unmarked", "--seed", "43", "--decode-tps", "40", "--model", model)
	}
	changing := sim("model-one")
	steady := startSimProcess(t, bin, "--unmarked", "--seed", "44", "--decode-tps", "40", "--model", "model-one")
	const n = 24
	root := t.TempDir()
	dir := filepath.Join(root, "I")
	writeTopicPrompts(t, dir, "I", n)
	raw := filepath.Join(dir, "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+addr, "--server", steady,
		"--concurrency", "4", "--max-new-tokens", "20", "--ignore-eos", "--down-limit", "1m", root)
	// 20 tokens at 40 tokens/s: half a second each, 4 at a time.
	waitFor(t, 30*time.Second, "the first answers written", func() bool {
		data, _ := os.ReadFile(raw)
		return strings.Count(string(data), "\n") >= 4
	})
	changing.Kill()
	time.Sleep(300 * time.Millisecond)
	sim("model-two")
	code := gen.WaitWithin(t, 2*time.Minute)
	log := gen.Stderr()
	if code != 0 {
		t.Fatalf("gen: exit %d; want exit 0, the other server answering the rest\n%s", code, log)
	}
	answers, byModel := answersByModel(t, raw)
	if len(answers) != n || byModel["model-one"] != n {
		t.Errorf("%d prompts answered, by model %v; want all %d, each once, by model-one\n%s", len(answers), byModel, n, log)
	}
	for id, k := range answers {
		if k != 1 {
			t.Errorf("%s: %d answers; want 1", id, k)
		}
	}
	identity := identityEvent(t, bin, db)
	if !strings.HasPrefix(identity, "http://"+addr+": ") || !strings.Contains(identity, `"model-one" before, "model-two" now`) {
		t.Errorf("identity event %q; want one of http://%s naming model-one and model-two\n%s", identity, addr, log)
	}
	if !strings.Contains(log, "its prompts go to the other server left") {
		t.Errorf("gen does not say the other server goes on:\n%s", log)
	}
}
