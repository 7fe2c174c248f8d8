package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// gen --mix: each record's sampling drawn from a spec by a hash of its
// dataset, id, sample and seed; the same through SIGKILL and resume,
// shards, a redo and a fresh run; the shares within sampling noise; a
// resume with another spec refused; enable_thinking reaching the model on
// every turn and tool step of a conversation.

const mixTemp = "temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15"

// drawsOf reads each answer's "drawn" and "mix_values" from the dataset's answer files
// under dir (raw_responses*.jsonl: a shard writes its own), by id; an id
// answered twice (a redo) must have drawn the same both times.
func drawsOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "raw_responses*.jsonl"))
	draws := map[string]string{}
	for _, f := range files {
		eachJSONLine(t, f, func(l []byte) {
			var a struct {
				ID         string
				Provenance struct {
					Drawn map[string]string `json:"drawn"`
				}
				MixValues map[string]any `json:"mix_values"`
			}
			if err := json.Unmarshal(l, &a); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b, _ := json.Marshal([]any{a.Provenance.Drawn, a.MixValues})
			if old, ok := draws[a.ID]; ok && old != string(b) {
				t.Errorf("%s: %s drew %s, then %s", f, a.ID, old, b)
			}
			draws[a.ID] = string(b)
		})
	}
	return draws
}

// sameDraws fails the test unless got drew, for every id, what want drew.
func sameDraws(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d answers, want %d", what, len(got), len(want))
	}
	bad := 0
	for id, w := range want {
		if g := got[id]; g != w && bad < 5 {
			bad++
			t.Errorf("%s: %s drew %s, an uninterrupted run %s", what, id, g, w)
		}
	}
}

// TestGenMixDrawsTheSameEverywhere: an uninterrupted run, a run
// SIGKILLed several times and resumed, the two shards of a sharded run
// and a redo all give every record the same draw.
func TestGenMixDrawsTheSameEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 3, Slots: 16, DecodeTokensPerSec: 2000})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "M"), "M", 300)
	mix := []string{"--mix", mixTemp, "--mix", "top_k=20:0.3,-1:0.7", "--seed", "5"}
	run := func(db, out string, more ...string) []string {
		return append(append([]string{"--db", db, "gen", "--server", url, "--out", out, "--concurrency", "8"}, mix...), append(more, root)...)
	}
	whole := t.TempDir()
	mustRunGendex(t, bin, run(filepath.Join(whole, "g.db"), whole)...)
	want := drawsOf(t, filepath.Join(whole, "M"))
	if len(want) != 300 {
		t.Fatalf("the uninterrupted run drew for %d records, want 300", len(want))
	}

	killed := t.TempDir()
	args := run(filepath.Join(killed, "g.db"), killed)
	kills := 0
	for i := range 6 {
		p := startGendex(t, bin, "", args...)
		select {
		case <-time.After(time.Duration(150+100*i) * time.Millisecond):
			p.Kill()
			kills++
		case <-p.Done():
		}
	}
	mustRunGendex(t, bin, args...)
	if kills < 3 {
		t.Errorf("only %d runs were killed", kills)
	}
	sameDraws(t, "killed and resumed", want, drawsOf(t, filepath.Join(killed, "M")))

	shards := t.TempDir()
	for _, s := range []string{"0/2", "1/2"} {
		mustRunGendex(t, bin, run(filepath.Join(shards, strings.Replace(s, "/", "of", 1)+".db"), shards, "--shard", s)...)
	}
	sameDraws(t, "two shards", want, drawsOf(t, filepath.Join(shards, "M")))

	ids := filepath.Join(t.TempDir(), "redo.txt")
	writeTestFile(t, ids, "M-00001\nM-00002\nM-00150\nM-00300\n")
	mustRunGendex(t, bin, run(filepath.Join(whole, "g.db"), whole, "--redo", ids)...)
	sameDraws(t, "redone", want, drawsOf(t, filepath.Join(whole, "M"))) // drawsOf: each redone id drew what it drew first
}

// recordingProxy forwards to url and keeps each chat request's body by
// its last user message.
type recordingProxy struct {
	mu     sync.Mutex
	bodies map[string]map[string]any
}

func startRecordingProxy(t *testing.T, url string) (*recordingProxy, string) {
	t.Helper()
	target, _ := neturl.Parse(url)
	rp := &recordingProxy{bodies: map[string]map[string]any{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var body map[string]any
			json.Unmarshal(b, &body)
			msgs, _ := body["messages"].([]any)
			if len(msgs) > 0 {
				last, _ := msgs[len(msgs)-1].(map[string]any)
				rp.mu.Lock()
				rp.bodies[fmt.Sprint(last["content"])] = body
				rp.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return rp, srv.URL
}

// TestGenMixSharesWithinNoise answers 2,000 prompts with a mixture of
// temperatures and thinking: each value's share is within 4.5 standard
// deviations of its weight (query mix, and check's made_by), and each
// request carried its record's draw.
func TestGenMixSharesWithinNoise(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulator")
	}
	bin := gendexBinary(t)
	t.Parallel()
	rec, url := startRecordingProxy(t, simURL(t, sim.Config{Seed: 4, Slots: 64, DecodeTokensPerSec: 100000}))
	dir := t.TempDir()
	root := promptsRoot(t, "S", 2000)
	db := filepath.Join(dir, "g.db")
	mustRunGendex(t, bin, "--db", db, "gen", "--server", url, "--api", "chat", "--max-new-tokens", "8", "--out", dir,
		"--mix", mixTemp, "--mix", "enable_thinking=true:0.75,false:0.25", root)
	var rows []struct {
		Key, Value string
		Weight     float64
		Answers    int
		Share      float64
		Z          *float64
		Off        bool
	}
	if err := json.Unmarshal([]byte(mustRunGendex(t, bin, "--db", db, "query", "mix", "--format", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("query mix: %d rows, want 5 (3 temperatures, 2 thinking): %+v", len(rows), rows)
	}
	for _, r := range rows {
		sd := math.Sqrt(2000 * r.Weight * (1 - r.Weight))
		if r.Off || math.Abs(float64(r.Answers)-2000*r.Weight) > 4.5*sd {
			t.Errorf("%s=%s: %d of 2000 answers, weight %v: off", r.Key, r.Value, r.Answers, r.Weight)
		}
	}
	// Every request carried what its answer says it drew.
	n := 0
	eachJSONLine(t, filepath.Join(dir, "S", "raw_responses.jsonl"), func(l []byte) {
		var a struct {
			ID         string
			Provenance struct{ Drawn map[string]string }
			MixValues  map[string]any `json:"mix_values"`
		}
		json.Unmarshal(l, &a)
		var i int
		fmt.Sscanf(a.ID, "p%d", &i)
		rec.mu.Lock()
		body := rec.bodies[fmt.Sprintf("prompt %d", i)]
		rec.mu.Unlock()
		temp, _ := body["temperature"].(float64)
		kw, _ := body["chat_template_kwargs"].(map[string]any)
		switch d := a.Provenance.Drawn; {
		case temp != a.MixValues["temperature"], kw["enable_thinking"] != a.MixValues["enable_thinking"],
			d["temperature"] == "u(0.2,1.0)" && (temp < 0.2 || temp >= 1.0),
			d["temperature"] != "u(0.2,1.0)" && fmt.Sprint(temp) != strings.TrimSuffix(d["temperature"], ".0"),
			fmt.Sprint(kw["enable_thinking"]) != d["enable_thinking"]:
			if n++; n < 5 {
				t.Errorf("%s drew %v, mix_values %v; its request sent temperature %v, chat_template_kwargs %v", a.ID, d, a.MixValues, body["temperature"], kw)
			}
		}
	})
	code, out, _ := runGendex(t, bin, "", "--db", db, "check", "--allow-simulated", "--format", "json", filepath.Join(dir, "S"))
	if !strings.Contains(out, `drawn per record (--mix): enable_thinking=true`) || strings.Contains(out, "mix_share") {
		t.Errorf("check (exit %d) says no shares in made_by, or blocks them:\n%s", code, out)
	}
	// The same answers, every greedy one's provenance edited by hand to
	// say 1.0: a share far off the spec, which check blocks.
	b, err := os.ReadFile(filepath.Join(dir, "S", "raw_responses.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "S")
	writeTestFile(t, filepath.Join(edited, "raw_responses.jsonl"), strings.ReplaceAll(string(b), `"temperature":"0"}`, `"temperature":"1.0"}`))
	db2 := filepath.Join(t.TempDir(), "g.db")
	mustRunGendex(t, bin, "--db", db2, "ingest", edited)
	code, out, _ = runGendex(t, bin, "", "--db", db2, "check", "--allow-simulated", edited)
	if code == 0 || !strings.Contains(out, "mix_share") || !strings.Contains(out, "temperature=0 0 of 2000 answers, 0.0%") {
		t.Errorf("check of answers whose greedy share was edited to 0 (exit %d):\n%s", code, out)
	}
}

// TestGenMixRefusesAnotherSpec: a resume with another spec, or without
// the mixture, is refused before any request, naming both; with the same
// spec it goes on.
func TestGenMixRefusesAnotherSpec(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulator")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 5})
	dir := t.TempDir()
	root := promptsRoot(t, "R", 20)
	args := func(more ...string) []string {
		return append(append([]string{"--db", filepath.Join(dir, "g.db"), "gen", "--server", url, "--out", dir}, more...), root)
	}
	mustRunGendex(t, bin, args("--mix", "temperature=0:0.5,1:0.5")...)
	appendPrompts(t, filepath.Join(root, "R"), []string{`{"id":"more","text":"one more"}`})
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--mix", "temperature=0:0.2,1:0.8"}, `mix.temperature: "0:0.5,1:0.5" before, "0:0.2,1:0.8" now`},
		{nil, `mix.temperature: "0:0.5,1:0.5" before, unset (the server's default) now`},
	} {
		code, _, errOut := runGendex(t, bin, "", args(c.flags...)...)
		if code != exitRefused || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "holds 20 answers made with model sim-model, sampling {\"max_new_tokens\":128}, --mix temperature=0:0.5,1:0.5;") {
			t.Errorf("gen %v on answers of another spec: exit %d, want %d naming %q:\n%s", c.flags, code, exitRefused, c.want, errOut)
		}
	}
	mustRunGendex(t, bin, args("--mix", "temperature=0:0.5,1:0.5")...)
	if n := lines(t, filepath.Join(dir, "R", "raw_responses.jsonl")); n != 21 {
		t.Errorf("%d answers after the resume with the same spec, want 21", n)
	}
}

// TestGenMixUsageMistakes: a spec that does not add up, an unknown key
// and a key also set by its own flag are usage errors naming the spec.
func TestGenMixUsageMistakes(t *testing.T) {
	t.Parallel()
	root := promptsRoot(t, "U", 1)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--mix", "temperature=0:0.5,1:0.6"}, `--mix "temperature=0:0.5,1:0.6": the weights sum to 1.1, want 1`},
		{[]string{"--mix", "temp=0:1"}, `unknown key "temp" (known: enable_thinking,`},
		{[]string{"--temperature", "0.7", "--mix", "temperature=0:1"}, "--temperature and --mix temperature both set temperature: give one of them"},
	} {
		r := gendex(t, testEnv(nil), append(append([]string{"--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", "sim"}, c.flags...), root)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("gen %v: %s\nwant exit 2 saying %q", c.flags, r, c.want)
		}
	}
}

// TestGenMixThinkingReachesEveryTurn: on a reasoning model, a
// multi-turn conversation's every turn and a tool conversation's every
// step think exactly when their record drew enable_thinking true (the
// sim's template honours chat_template_kwargs, through /v1/tokenize on
// /generate and on the chat route alike).
func TestGenMixThinkingReachesEveryTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulator")
	}
	bin := gendexBinary(t)
	t.Parallel()
	for _, api := range []string{"generate", "chat"} {
		url := startSimProcess(t, bin, "--reasoning", "--tool-calls", "--tool-call-parser", "qwen25")
		dir := t.TempDir()
		root := filepath.Join(dir, "data")
		if out, err := exec.Command(testdataTool(t, "seedgen"), "-root", root, "-n", "12").CombinedOutput(); err != nil {
			t.Fatalf("seedgen: %v\n%s", err, out)
		}
		for _, ds := range []string{"sharegpt", "agent"} {
			mustRunGendex(t, bin, "--db", filepath.Join(dir, "g.db"), "gen", "--server", url, "--api", api, "--max-new-tokens", "8192",
				"--mix", "enable_thinking=true:0.5,false:0.5", filepath.Join(root, ds))
			counts := map[string]int{}
			for _, f := range []string{"turns.jsonl", "raw_responses.jsonl"} {
				eachJSONLine(t, filepath.Join(root, ds, f), func(l []byte) {
					var a struct {
						ID              string
						ReasoningTokens int `json:"reasoning_tokens"`
						Provenance      struct{ Drawn map[string]string }
					}
					json.Unmarshal(l, &a)
					think := a.Provenance.Drawn["enable_thinking"]
					counts[f+" "+think]++
					if (think == "true") != (a.ReasoningTokens > 0) {
						t.Errorf("%s %s %s: %s drew enable_thinking %q and has %d reasoning tokens", api, ds, f, a.ID, think, a.ReasoningTokens)
					}
				})
			}
			if counts["turns.jsonl true"] == 0 || counts["turns.jsonl false"] == 0 || counts["raw_responses.jsonl true"] == 0 || counts["raw_responses.jsonl false"] == 0 {
				t.Errorf("%s %s: want earlier turns and answers of both draws, got %v", api, ds, counts)
			}
		}
	}
}

// TestGenMixThinkingNeedsATemplate: the startup line says the mixture;
// enable_thinking drawn for a text
// prompt sent raw to /generate (no chat template to read it) stops the
// run before it is sent, saying what to do; with --api chat the text goes
// as a user turn, and is answered.
func TestGenMixThinkingNeedsATemplate(t *testing.T) {
	t.Parallel()
	root := promptsRoot(t, "T", 5)
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", "sim", "--mix", "enable_thinking=true:0.5,false:0.5", root}
	r := gendex(t, testEnv(nil), args...)
	if r.code != exitRefused || !strings.Contains(r.stderr, "--mix enable_thinking reaches the model only through one: give --api chat") ||
		!strings.Contains(r.stderr, "(unset keys: server defaults), drawn per record (--mix): enable_thinking=true:0.5,false:0.5\n") {
		t.Errorf("text prompts to /generate with --mix enable_thinking: %s\nwant exit %d saying to give --api chat", r, exitRefused)
	}
	if n := lines(t, filepath.Join(root, "T", "raw_responses.jsonl")); n != 0 {
		t.Errorf("%d answers written without their draw", n)
	}
	mustGendex(t, testEnv(nil), append([]string{"--db", db, "gen", "--api", "chat", "--server", "sim", "--mix", "enable_thinking=true:0.5,false:0.5"}, root)...)
	if n := lines(t, filepath.Join(root, "T", "raw_responses.jsonl")); n != 5 {
		t.Errorf("--api chat: %d answers, want 5", n)
	}
}
