package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// origMarker is in every original assistant turn; it must never reach the
// server under --turns all.
const origMarker = "ORIGINAL-ASSISTANT-TEXT"

// recorder passes requests to a handler and keeps the POST bodies. When
// refuse is set and says so, a generation request gets a 503 instead.
type recorder struct {
	h      http.Handler
	mu     sync.Mutex
	reqs   []recorded
	refuse func(path string, body []byte) bool
}

type recorded struct {
	path string
	body []byte
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if r.Method == http.MethodPost && !isProbe(b) {
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, recorded{r.URL.Path, b})
		rc.mu.Unlock()
		if rc.refuse != nil && isGeneration(r.URL.Path) && rc.refuse(r.URL.Path, b) {
			http.Error(w, `{"object":"error","message":"refused by the test","code":503}`, http.StatusServiceUnavailable)
			return
		}
	}
	rc.h.ServeHTTP(w, r)
}

func (rc *recorder) all() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.reqs...)
}

// isProbe reports whether a request body is gen's probe of a route ({}),
// which asks for no work (preflight.go).
func isProbe(body []byte) bool { return string(bytes.TrimSpace(body)) == "{}" }

func isGeneration(path string) bool {
	return path == "/generate" || path == "/v1/chat/completions" || path == "/v1/completions"
}

func recordedSim(t *testing.T, cfg sim.Config) (*recorder, string) {
	t.Helper()
	rc := &recorder{h: sim.New(cfg).Handler()}
	hs := httptest.NewServer(rc)
	t.Cleanup(hs.Close)
	return rc, hs.URL
}

// userText is conversation c's user turn u of dataset ds.
func userText(ds string, c, u int) string {
	return fmt.Sprintf("%s-c%05d-u%d: explain the cache", ds, c, u)
}

var userRe = regexp.MustCompile(`([A-Za-z_]+)-c(\d{5})-u(\d+): explain`)

// writeConversations writes n conversations of k user turns, each followed
// by an original assistant turn holding origMarker: shape "messages" (with
// a system turn) or "sharegpt" (conversations, from/value).
func writeConversations(t *testing.T, root, ds, shape string, n, k int) {
	t.Helper()
	dir := filepath.Join(root, ds)
	os.MkdirAll(dir, 0o755)
	var b bytes.Buffer
	for c := 1; c <= n; c++ {
		var turns []map[string]string
		if shape == "messages" {
			turns = append(turns, map[string]string{"role": "system", "content": "Be brief."})
		}
		for u := 1; u <= k; u++ {
			a := fmt.Sprintf("%s %d.%d", origMarker, c, u)
			if shape == "messages" {
				turns = append(turns, map[string]string{"role": "user", "content": userText(ds, c, u)}, map[string]string{"role": "assistant", "content": a})
			} else {
				turns = append(turns, map[string]string{"from": "human", "value": userText(ds, c, u)}, map[string]string{"from": "gpt", "value": a})
			}
		}
		key := map[string]string{"messages": "messages", "sharegpt": "conversations"}[shape]
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%05d", ds, c), key: turns, "max_new_tokens": 24})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// request is a generation request as the test reads it back.
type request struct {
	ds       string
	conv     int
	turn     int
	ids      []int            // /generate
	messages []client.Message // chat
}

// generations reads back the generation requests rc saw, and checks that
// none holds an original assistant turn.
func generations(t *testing.T, rc *recorder) []request {
	t.Helper()
	var out []request
	for _, r := range rc.all() {
		if strings.Contains(string(r.body), origMarker) {
			t.Errorf("%s got original assistant text: %s", r.path, r.body)
		}
		if !isGeneration(r.path) {
			continue
		}
		var body struct {
			InputIDs []int            `json:"input_ids"`
			Messages []client.Message `json:"messages"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		q := request{ids: body.InputIDs, messages: body.Messages}
		text := sim.Decode(body.InputIDs, false)
		for _, m := range body.Messages {
			text += "\n" + m.Content
		}
		if strings.Contains(text, origMarker) {
			t.Errorf("%s got original assistant text: %q", r.path, text)
		}
		ms := userRe.FindAllStringSubmatch(text, -1)
		if len(ms) == 0 {
			t.Fatalf("a request without a user turn of the test: %q", text)
		}
		last := ms[len(ms)-1]
		q.ds = last[1]
		q.conv, _ = strconv.Atoi(last[2])
		q.turn, _ = strconv.Atoi(last[3])
		if q.turn != len(ms) {
			t.Errorf("request for turn %d holds %d user turns: %q", q.turn, len(ms), text)
		}
		out = append(out, q)
	}
	return out
}

// readJSONL reads a JSONL file's lines as raw messages (none when it does
// not exist).
func readJSONL(t *testing.T, path string) []json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if !json.Valid(l) {
			t.Fatalf("%s: invalid line %q", path, l)
		}
		out = append(out, l)
	}
	return out
}

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkConversations checks a dataset of n conversations of k turns after
// --turns all: one raw line per conversation with k turn objects and the
// sums of their counts, k-1 turn lines each equal to their turn objects,
// exactly one generation request per turn, each holding the regenerated
// turns before it, and an index that agrees with a fresh one of the files.
func checkConversations(t *testing.T, dbPath, out, ds string, n, k int, reqs []request, tokenize *client.Client, system bool) {
	t.Helper()
	raw := readJSONL(t, filepath.Join(out, ds, "raw_responses.jsonl"))
	if len(raw) != n {
		t.Fatalf("%s: %d raw lines; want %d", ds, len(raw), n)
	}
	texts := map[int][]string{} // conversation -> its turns' texts
	for _, l := range raw {
		m := decodeMap(t, l)
		var c int
		fmt.Sscanf(m["id"].(string), ds+"-%05d", &c)
		turns, _ := m["turns"].([]any)
		if len(turns) != k {
			t.Fatalf("%s: %d turns; want %d: %s", m["id"], len(turns), k, l)
		}
		sums := map[string]float64{}
		lacks := map[string]bool{}
		for i, tv := range turns {
			to := tv.(map[string]any)
			if _, ok := to["id"]; ok {
				t.Errorf("%s: turn %d has an id", m["id"], i+1)
			}
			if _, ok := to["prompt_ids"]; ok != (i == k-1 && tokenize != nil) {
				t.Errorf("%s: turn %d: prompt_ids present %v", m["id"], i+1, ok)
			}
			texts[c] = append(texts[c], to["text"].(string))
			for _, key := range []string{"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"} {
				n, ok := to[key].(float64)
				sums[key] += n
				lacks[key] = lacks[key] || !ok
			}
		}
		for key, s := range sums {
			if v, ok := m[key]; lacks[key] && ok || !lacks[key] && v != s {
				t.Errorf("%s: %s %v; the turns sum to %v (a turn lacks it: %v)", m["id"], key, v, s, lacks[key])
			}
		}
		lastTurn := turns[k-1].(map[string]any)
		for _, key := range []string{"finish_reason", "finished_at", "server"} {
			if m[key] != lastTurn[key] {
				t.Errorf("%s: %s %v; the last turn's is %v", m["id"], key, m[key], lastTurn[key])
			}
		}
	}
	tl := readJSONL(t, filepath.Join(out, ds, "turns.jsonl"))
	if len(tl) != n*(k-1) {
		t.Errorf("%s: %d turn lines; want %d", ds, len(tl), n*(k-1))
	}
	rawByID := map[string]map[string]any{}
	for _, l := range raw {
		m := decodeMap(t, l)
		rawByID[m["id"].(string)] = m
	}
	seen := map[string]bool{}
	for _, l := range tl {
		m := decodeMap(t, l)
		id, turn := m["id"].(string), int(m["turn"].(float64))
		key := ingest.TurnID(id, turn)
		if seen[key] || m["turns"] != float64(k) || turn < 1 || turn >= k {
			t.Errorf("%s: turn line %s", ds, l)
			continue
		}
		seen[key] = true
		delete(m, "id")
		delete(m, "turn")
		delete(m, "turns")
		if want := rawByID[id]["turns"].([]any)[turn-1]; !reflect.DeepEqual(any(m), want) {
			t.Errorf("%s: turn line %v is not turn %d of the conversation %v", key, m, turn, want)
		}
	}
	// Exactly one request per turn, with the regenerated turns before it.
	per := map[[2]int]int{}
	for _, q := range reqs {
		if q.ds != ds {
			continue
		}
		per[[2]int{q.conv, q.turn}]++
		var want []client.Message
		if system {
			want = append(want, client.Message{Role: "system", Content: "Be brief."})
		}
		for u := 1; u <= q.turn; u++ {
			want = append(want, client.Message{Role: "user", Content: userText(ds, q.conv, u)})
			if u < q.turn {
				want = append(want, client.Message{Role: "assistant", Content: texts[q.conv][u-1]})
			}
		}
		if tokenize == nil {
			if !reflect.DeepEqual(q.messages, want) {
				t.Errorf("%s c%d turn %d: messages %+v; want %+v", ds, q.conv, q.turn, q.messages, want)
			}
			continue
		}
		ids, err := tokenize.TokenizeMessages(t.Context(), want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(q.ids, ids) {
			t.Errorf("%s c%d turn %d: input_ids %q; want %q", ds, q.conv, q.turn, sim.Decode(q.ids, false), sim.Decode(ids, false))
		}
		if q.turn == k {
			last := rawByID[fmt.Sprintf("%s-%05d", ds, q.conv)]["turns"].([]any)[k-1].(map[string]any)
			got, _ := json.Marshal(last["prompt_ids"])
			sent, _ := json.Marshal(q.ids)
			if string(got) != string(sent) {
				t.Errorf("%s c%d: prompt_ids %s; sent %s", ds, q.conv, got, sent)
			}
		}
	}
	for c := 1; c <= n; c++ {
		for u := 1; u <= k; u++ {
			if got := per[[2]int{c, u}]; got != 1 {
				t.Errorf("%s c%d turn %d: %d generation requests; want exactly 1", ds, c, u, got)
			}
		}
	}
	checkIndexed(t, dbPath, out, ds, n, n*(k-1))
}

// checkIndexed checks that the index counts n conversations and the turn
// lines, with the counts of a fresh index of the same files.
func checkIndexed(t *testing.T, dbPath, out, ds string, n, turns int) {
	t.Helper()
	db := openDB(t, dbPath)
	var s store.Summary
	db.View(func(v *store.View) (err error) { s, err = v.Summary(ds); return err })
	db.Close()
	fresh, err := store.Open(filepath.Join(t.TempDir(), "fresh.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	ix := &ingest.Indexer{DB: fresh}
	for _, src := range []ingest.Source{
		{Path: filepath.Join(out, ds, "raw_responses.jsonl"), Dataset: ds, Stage: store.Raw},
		{Path: filepath.Join(out, ds, "turns.jsonl"), Dataset: ds, Stage: store.Turns},
	} {
		if _, err := ix.IndexFile(t.Context(), src); err != nil {
			t.Fatal(err)
		}
	}
	var fs store.Summary
	fresh.View(func(v *store.View) (err error) { fs, err = v.Summary(ds); return err })
	if got := s.Stage(store.Raw).Records; got != uint64(n) {
		t.Errorf("%s: index: %d raw records; want %d", ds, got, n)
	}
	if got := s.Stage(store.Turns).Records; got != uint64(turns) {
		t.Errorf("%s: index: %d turn records; want %d", ds, got, turns)
	}
	for _, st := range []store.Stage{store.Raw, store.Turns} {
		if got, want := s.Stage(st), fs.Stage(st); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: index %s %+v; a fresh index of the files %+v", ds, st, got, want)
		}
	}
}
