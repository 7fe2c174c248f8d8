package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGenToolStepsSurviveSIGKILL kills a running gen of tool conversations
// (--turns all, against a separate `gendex sim --tool-calls`, through a
// proxy that notes which step of which conversation each request asks) at
// random moments once steps are written, and starts it again, through
// /generate and through chat; then lets it finish. A step whose turn line
// was on disk at a kill is never asked again; every conversation has one
// raw line, whose earlier steps are its turn lines, one each; every step
// was asked on the history of the recorded steps before it (the model's
// own turns with their call ids, each result sent back with its call's
// id); each start counts the half-done conversations the files hold, and
// the index equals a fresh ingest of the folder. (Before, a tool
// conversation wrote no turn lines and was asked again from its first step
// after every restart.)
func TestGenToolStepsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	sim := startSimProcess(t, bin, "--tool-calls", "--tool-call-parser", "qwen25", "--slots", "32", "--decode-tps", "300")
	for _, api := range []string{"generate", "chat"} {
		t.Run(api, func(t *testing.T) { killToolSteps(t, bin, sim, api) })
	}
}

// stepAsk is one request for a step of a tool conversation, as the proxy
// saw it.
type stepAsk struct {
	run, step int
	id        string
	msgs      []map[string]any
}

// stepProxy forwards to a server and notes each request that asks a step
// of a tool conversation of simToolDataset (path ask, with messages and
// tools), with the run it came in.
type stepProxy struct {
	run  atomic.Int64
	mu   sync.Mutex
	asks []stepAsk
}

var firstUserRe = regexp.MustCompile(`^(?:Weather in city (\d+)\?|Area of (\d+) by 3\?)$`)

func (sp *stepProxy) start(t *testing.T, target, ask string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a killed gen's requests end so
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages []map[string]any `json:"messages"`
			Tools    json.RawMessage  `json:"tools"`
		}
		if r.URL.Path == ask && json.Unmarshal(body, &req) == nil && req.Messages != nil && req.Tools != nil {
			a := stepAsk{run: int(sp.run.Load()), step: 1, msgs: req.Messages}
			for _, m := range req.Messages {
				if m["role"] == "assistant" {
					a.step++
				}
				if c, _ := m["content"].(string); m["role"] == "user" && a.id == "" {
					if g := firstUserRe.FindStringSubmatch(c); g != nil {
						a.id = "m" + g[1]
						if g[2] != "" {
							a.id = "g" + g[2]
						}
					}
				}
			}
			sp.mu.Lock()
			sp.asks = append(sp.asks, a)
			sp.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// toolLines reads path's whole lines (a killed run's torn last line left
// out) as objects.
func toolLines(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	for _, l := range bytes.Split(b[:bytes.LastIndexByte(b, '\n')+1], []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, l, err)
		}
		out = append(out, m)
	}
	return out
}

func lineID(m map[string]json.RawMessage) string {
	var id string
	json.Unmarshal(m["id"], &id)
	return id
}

// stepKey is "ID#n".
func stepKey(m map[string]json.RawMessage) string {
	var n int
	json.Unmarshal(m["turn"], &n)
	return lineID(m) + "#" + strconv.Itoa(n)
}

var halfDoneRe = regexp.MustCompile(`\((\d+) of them conversations half done`)

// killToolSteps runs gen --api api on a tool dataset against sim (see
// TestGenToolStepsSurviveSIGKILL).
func killToolSteps(t *testing.T, bin, sim, api string) {
	ask := "/v1/tokenize"
	if api == "chat" {
		ask = "/v1/chat/completions"
	}
	var sp stepProxy
	url := sp.start(t, sim, ask)
	const n = 30
	dir := simToolDataset(t, n)
	turnsPath, rawPath := filepath.Join(dir, "turns.jsonl"), filepath.Join(dir, "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--api", api, "--concurrency", "16", "--max-new-tokens", "400", dir}
	size := func() int64 {
		fi, err := os.Stat(turnsPath)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	// halfDone is the conversations with a step on disk but no raw line.
	halfDone := func() int {
		raw := map[string]bool{}
		for _, l := range toolLines(t, rawPath) {
			raw[lineID(l)] = true
		}
		half := map[string]bool{}
		for _, l := range toolLines(t, turnsPath) {
			half[lineID(l)] = !raw[lineID(l)]
		}
		c := 0
		for _, h := range half {
			if h {
				c++
			}
		}
		return c
	}
	written := map[string]int{} // ID#n -> the run after which its line was on disk
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	kills, halfKills, run := 0, 0, 0
	for ; run < 20 && halfKills < 5; run++ {
		sp.run.Store(int64(run))
		want := halfDone()
		before := size()
		killed, gen := killWhileWriting(t, bin, args, func() bool { return size() != before }, time.Duration(rng.IntN(700))*time.Millisecond)
		if !killed && gen.Wait() != 0 {
			t.Fatalf("run %d ended on its own with exit %d\n%s", run, gen.Wait(), gen.Stderr())
		}
		got := 0
		if m := halfDoneRe.FindStringSubmatch(gen.Stderr()); m != nil {
			got, _ = strconv.Atoi(m[1])
		}
		if got != want {
			t.Errorf("run %d started with %d conversations half done; the files hold %d:\n%s", run, got, want, gen.Stderr())
		}
		for _, l := range toolLines(t, turnsPath) {
			if _, ok := written[stepKey(l)]; !ok {
				written[stepKey(l)] = run
			}
		}
		if !killed {
			break // done
		}
		kills++
		if halfDone() > 0 {
			halfKills++
		}
	}
	sp.run.Store(int64(run + 1))
	turnsBefore := len(toolLines(t, turnsPath))
	final := mustRunGendex(t, bin, args...)
	t.Logf("%d kills, %d with conversations half done, %d steps written before the final run", kills, halfKills, len(written))
	if kills < 3 || halfKills < 3 {
		t.Errorf("%d runs were killed, %d of them with tool conversations half done (steps in turns.jsonl); the test wants at least 3 of each", kills, halfKills)
	}
	checkNoneHalfDone(t, final)
	if m := regexp.MustCompile(`(\d+) earlier turns were answered`).FindStringSubmatch(final); m == nil && len(toolLines(t, turnsPath)) > turnsBefore ||
		m != nil && m[1] != strconv.Itoa(len(toolLines(t, turnsPath))-turnsBefore) {
		t.Errorf("the final run wrote %d turn lines; its summary says otherwise:\n%s", len(toolLines(t, turnsPath))-turnsBefore, final)
	}
	// No step asked again once its line was on disk.
	asked := map[string][]stepAsk{}
	for _, a := range sp.asks {
		key := a.id + "#" + strconv.Itoa(a.step)
		asked[key] = append(asked[key], a)
		if w, ok := written[key]; ok && a.run > w {
			t.Errorf("%s was asked again in run %d, though its line was written by run %d", key, a.run, w)
		}
	}
	checkToolSteps(t, dir, n, asked)
	checkToolIndex(t, db, dir) // the index equals a fresh index of the same files
	if _, err := os.Stat(filepath.Join(dir, "errors.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an errors.jsonl exists though no conversation failed: %v", err)
	}
}

// checkToolSteps checks the finished folder dir of simToolDataset(n): each
// conversation has one raw line; its steps but the last are its turn
// lines, one each, and no other; and the last request for each step (the
// one answered: see asked) sent the recorded steps before it as the
// model's turns, each call answered by a tool turn with its id.
func checkToolSteps(t *testing.T, dir string, n int, asked map[string][]stepAsk) {
	t.Helper()
	raw := map[string][]map[string]json.RawMessage{}
	for _, l := range toolLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		raw[lineID(l)] = append(raw[lineID(l)], l)
	}
	turns := map[string][]map[string]json.RawMessage{}
	for _, l := range toolLines(t, filepath.Join(dir, "turns.jsonl")) {
		turns[stepKey(l)] = append(turns[stepKey(l)], l)
	}
	used, multi := 0, 0
	for i := range n {
		for _, id := range []string{fmt.Sprintf("m%d", i), fmt.Sprintf("g%d", i)} {
			if len(raw[id]) != 1 {
				t.Errorf("%s: %d raw lines; want 1", id, len(raw[id]))
				continue
			}
			var steps []map[string]json.RawMessage
			if err := json.Unmarshal(raw[id][0]["turns"], &steps); err != nil || len(steps) == 0 {
				t.Errorf("%s: raw line without steps: %v", id, err)
				continue
			}
			if len(steps) > 1 {
				multi++
			}
			for k, step := range steps {
				key := id + "#" + strconv.Itoa(k+1)
				tl := turns[key]
				if k == len(steps)-1 {
					if len(tl) != 0 {
						t.Errorf("%s: the last step has a turn line", key)
					}
					break
				}
				used++
				if len(tl) != 1 {
					t.Errorf("%s: %d turn lines; want 1", key, len(tl))
					continue
				}
				line := map[string]json.RawMessage{}
				for k, v := range tl[0] {
					line[k] = v
				}
				delete(line, "id")
				delete(line, "turn")
				if !sameJSON(line, step) {
					t.Errorf("%s: the turn line is not step %d of the raw line:\n%s\n%s", key, k+1, mustJSON(line), mustJSON(step))
				}
			}
			for k := range steps {
				key := id + "#" + strconv.Itoa(k+1)
				a := asked[key]
				if len(a) == 0 {
					t.Errorf("%s: no request asked it", key)
					continue
				}
				checkStepHistory(t, key, a[len(a)-1].msgs, steps[:k])
			}
		}
	}
	if used != len(turns) {
		t.Errorf("%d turn lines, %d of them steps of a conversation's raw line", len(turns), used)
	}
	if multi < n/2 {
		t.Errorf("only %d conversations took more than one step", multi)
	}
}

// checkStepHistory checks that msgs, the messages a step was asked with,
// hold the recorded steps before it as the model's turns (text and calls
// with their ids), and the tool turns answer those calls by id, in order.
func checkStepHistory(t *testing.T, key string, msgs []map[string]any, before []map[string]json.RawMessage) {
	t.Helper()
	type call struct{ ID, Name, Args string }
	var sentTurns, wantTurns []string
	var sentResults, wantResults []string
	for _, m := range msgs {
		switch m["role"] {
		case "assistant":
			text, _ := m["content"].(string)
			var calls []call
			tcs, _ := m["tool_calls"].([]any)
			for _, c := range tcs {
				c := c.(map[string]any)
				fn := c["function"].(map[string]any)
				id, _ := c["id"].(string)
				calls = append(calls, call{id, fn["name"].(string), fn["arguments"].(string)})
			}
			sentTurns = append(sentTurns, fmt.Sprintf("%q %v", text, calls))
		case "tool":
			id, _ := m["tool_call_id"].(string)
			sentResults = append(sentResults, id)
		}
	}
	for _, s := range before {
		var text string
		json.Unmarshal(s["text"], &text)
		var tcs []struct {
			ID       string
			Function struct{ Name, Arguments string }
		}
		json.Unmarshal(s["tool_calls"], &tcs)
		var calls []call
		for _, c := range tcs {
			calls = append(calls, call{c.ID, c.Function.Name, c.Function.Arguments})
			wantResults = append(wantResults, c.ID)
		}
		wantTurns = append(wantTurns, fmt.Sprintf("%q %v", text, calls))
	}
	if !reflect.DeepEqual(sentTurns, wantTurns) || !reflect.DeepEqual(sentResults, wantResults) {
		t.Errorf("%s was asked on another history than its recorded steps:\nsent  %q results %q\nsteps %q results %q", key, sentTurns, sentResults, wantTurns, wantResults)
	}
}

func sameJSON(a, b map[string]json.RawMessage) bool {
	return mustJSON(a) == mustJSON(b)
}

// mustJSON is m as JSON with its keys sorted and its values compact.
func mustJSON(m map[string]json.RawMessage) string {
	var v map[string]any
	b, _ := json.Marshal(m)
	json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

var halfDoneAtEndRe = regexp.MustCompile(`(?m)^[^0-9\n].*?(-?\d+) conversations? (?:are )?half done`)

// checkNoneHalfDone checks that a finished run's summary counts no
// conversation half done (nor a negative number of them); a live line
// (it starts with the time) may count those in flight.
func checkNoneHalfDone(t *testing.T, out string) {
	t.Helper()
	for _, m := range halfDoneAtEndRe.FindAllStringSubmatch(out, -1) {
		if m[1] != "0" {
			t.Errorf("the run ended with %s conversations half done:\n%s", m[1], out)
		}
	}
}
