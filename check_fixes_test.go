package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every fix `gendex check` prints clears its reason: for each reason, a
// state that gives it (made for real, on the seed shapes of
// testdata/seedgen), check, the printed fix taken literally (only its
// placeholders URL, N, FILE, DATASET and "..." filled with real values),
// run, check again: the reason is gone. One harness, one row per reason.

// fixCase is one reason's row: how to make the state, check's flags, and
// the values of the fix's placeholders.
type fixCase struct {
	reason string // the blocking reason the state gives; "" any blocking reason but the content's
	name   string // for reason "": the state

	args []string
	// make makes the state in h.dir and returns check's target (a
	// dataset's folder); it fills h.fill with the placeholders' values.
	make func(h *fixRun) string
}

// fixRun is one row's folder: the seed-shaped data under data/, the
// default index there, an unmarked simulator (the real server), and the
// values of the placeholders.
type fixRun struct {
	t    *testing.T
	bin  string
	dir  string
	url  string // the real server
	fill map[string]string
}

// run runs gendex in the row's folder; a failure stops the row.
func (h *fixRun) must(args ...string) string {
	h.t.Helper()
	code, out, errOut := runGendex(h.t, h.bin, h.dir, args...)
	if code != 0 {
		h.t.Fatalf("making the state: gendex %q: exit %d\n%s%s", args, code, out, errOut)
	}
	return errOut
}

func (h *fixRun) path(p ...string) string { return filepath.Join(append([]string{h.dir}, p...)...) }

// ids writes the ids of dataset ds's answers (the first n; 0: all) to a
// file, for --redo FILE, and returns its path.
func (h *fixRun) ids(ds string, n int) string {
	h.t.Helper()
	var ids []string
	eachJSONLine(h.t, h.path("data", ds, "raw_responses.jsonl"), func(l []byte) {
		var a struct{ ID string }
		json.Unmarshal(l, &a)
		if n == 0 || len(ids) < n {
			ids = append(ids, a.ID)
		}
	})
	f := h.path(ds + "-redo.txt")
	writeTestFile(h.t, f, strings.Join(ids, "\n")+"\n")
	return f
}

// tamperingServer is a server whose chat answers' content edit rewrites
// (a server without its reasoning parser, a broken template), in front of
// the simulator at target.
func tamperingServer(t *testing.T, target string, edit func(content string) string) string {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/chat/completions") || r.StatusCode != 200 {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			for _, c := range anyList(m["choices"]) {
				if msg, ok := c.(map[string]any)["message"].(map[string]any); ok {
					s, _ := msg["content"].(string)
					msg["content"] = edit(s)
				}
			}
			body, _ = json.Marshal(m)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func anyList(v any) []any { l, _ := v.([]any); return l }

// The gen flags of every state: answers long enough to be whole.
var fixGen = []string{"gen", "--max-new-tokens", "8192"}

func genArgs(server string, more ...string) []string {
	return append(append(append([]string{}, fixGen...), "--server", server), more...)
}

var fixCases = []fixCase{
	{reason: "prompts_unknown", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--db", "other.db"), "data/sharegpt")...)
		h.must("ingest", "--dataset", "sharegpt", "--stage", "raw", "data/sharegpt/raw_responses.jsonl")
		return "data/sharegpt"
	}},
	{reason: "unanswered", make: func(h *fixRun) string {
		runGendex(h.t, h.bin, h.dir, "ingest", "data/sharegpt") // exit 1: the torn last line is left out
		return "data/sharegpt"
	}},
	{reason: "redo_pending", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url), "data/sharegpt")...)
		// The redo's server dies after one answer; gen stops, owing the rest.
		dying := startSimProcess(h.t, h.bin, "--unmarked", "--crash-after", "1")
		file := h.ids("sharegpt", 6)
		h.fill["FILE"], h.fill["..."] = file, file
		runGendex(h.t, h.bin, h.dir, append(genArgs(dying, "--redo", file, "--down-limit", "2s"), "data/sharegpt")...)
		return "data/sharegpt"
	}},
	{reason: "no_record", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url), "data/glaive")...)
		return "data/glaive"
	}},
	{reason: "stale_record", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/agent")...)
		h.must(append(genArgs(h.url, "--redo", h.ids("agent", 3)), "data/agent")...)
		return "data/agent"
	}},
	{reason: "all_excluded", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/ids")...)
		return "data/ids"
	}},
	{reason: "truncated_kept", make: func(h *fixRun) string {
		h.must("gen", "--server", h.url, "--max-new-tokens", "48", "--export", "conversations", "--include-truncated", "data/sharegpt")
		h.fill["N"] = "8192"
		return "data/sharegpt"
	}},
	{reason: "over_max_length", args: []string{"--max-length", "4096"}, make: func(h *fixRun) string {
		// ShareGPT of three human turns of about 1,100 bytes (a record of
		// some 3,500 tokens whose turns' prompts add up to over 6,000),
		// and of one turn of 5,000 bytes (a record over 4,096 tokens).
		var lines []string
		for i := 1; i <= 6; i++ {
			var turns []string
			for k := 0; k < 3-2*(i%2); k++ {
				q := strings.Repeat("why does the cache ", 58+200*(i%2))
				turns = append(turns, fmt.Sprintf(`{"from":"human","value":%q},{"from":"gpt","value":"old"}`, q))
			}
			lines = append(lines, fmt.Sprintf(`{"id":"long-%d","conversations":[%s]}`, i, strings.Join(turns, ",")))
		}
		writeTestFile(h.t, h.path("data", "long", "prompts.jsonl"), strings.Join(lines, "\n")+"\n")
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/long")...)
		return "data/long"
	}},
	{reason: "think_in_content", make: func(h *fixRun) string {
		// A vLLM that parses the reasoning apart but leaves a marker in
		// the content (a wrong --reasoning-parser).
		vllm := startSimProcess(h.t, h.bin, "--unmarked", "--flavor", "vllm", "--reasoning")
		bad := tamperingServer(h.t, vllm, func(s string) string { return "<think>\n" + s })
		h.must(append(genArgs(bad, "--export", "conversations"), "data/thinking")...)
		h.url = vllm
		return "data/thinking"
	}},
	{reason: "empty_content", make: func(h *fixRun) string {
		vllm := startSimProcess(h.t, h.bin, "--unmarked", "--flavor", "vllm")
		bad := tamperingServer(h.t, vllm, func(string) string { return "" })
		h.must(append(genArgs(bad, "--export", "conversations"), "data/sharegpt")...)
		h.url = vllm
		return "data/sharegpt"
	}},
	{reason: "repeated_text", make: func(h *fixRun) string {
		vllm := startSimProcess(h.t, h.bin, "--unmarked", "--flavor", "vllm")
		bad := tamperingServer(h.t, vllm, func(string) string { return "I cannot help with that." })
		h.must(append(genArgs(bad, "--export", "conversations"), "data/sharegpt")...)
		h.url = vllm
		return "data/sharegpt"
	}},
	{reason: "mixed_provenance", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url), "data/sharegpt")...)
		other := startSimProcess(h.t, h.bin, "--unmarked", "--model", "other-model")
		h.must(append(genArgs(other, "--redo", h.ids("sharegpt", 3), "--allow-mixed"), "data/sharegpt")...)
		h.must("export", "data/sharegpt")
		return "data/sharegpt"
	}},
	{reason: "mix_share", make: func(h *fixRun) string {
		// Answers drawn from a mixture, their provenance then edited by
		// hand: a value the spec cannot draw.
		h.must(append(genArgs(h.url, "--db", "other.db", "--mix", "temperature=0:0.5,1.0:0.5"), "data/sharegpt")...)
		raw := h.path("data", "sharegpt", "raw_responses.jsonl")
		b, err := os.ReadFile(raw)
		if err != nil {
			h.t.Fatal(err)
		}
		edited := bytes.ReplaceAll(b, []byte(`"drawn":{"temperature":"1.0"}`), []byte(`"drawn":{"temperature":"0.3"}`))
		if bytes.Equal(edited, b) {
			h.t.Fatal("no answer drew temperature 1.0")
		}
		writeTestFile(h.t, raw, string(edited))
		runGendex(h.t, h.bin, h.dir, "ingest", "data/sharegpt") // exit 1: the torn last prompt is left out
		return "data/sharegpt"
	}},
	{reason: "simulated", make: func(h *fixRun) string {
		h.must(append(genArgs("sim", "--export", "conversations"), "data/sharegpt")...)
		h.fill["FILE"] = h.ids("sharegpt", 0)
		return "data/sharegpt"
	}},
	// The disk: an answer edited in place, prompts appended, the records
	// deleted, after a run check called ready on the index alone.
	{name: "disk-answer-edited", reason: "files_changed", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/glaive")...)
		raw := h.path("data", "glaive", "raw_responses.jsonl")
		b := mustRead(h.t, raw)
		i := bytes.Index(b, []byte(`"finish_reason":"`))
		copy(b[i+len(`"finish_reason":"`):], "XXXX") // same size, same inode
		writeTestFile(h.t, raw, string(b))
		h.fill["FILE"] = raw
		return "data/glaive"
	}},
	{name: "disk-prompts-appended", reason: "index_behind", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/fncall")...)
		f, err := os.OpenFile(h.path("data", "fncall", "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			h.t.Fatal(err)
		}
		// The torn last line completed, and one prompt more.
		fmt.Fprintf(f, "\n"+`{"id":"fncall-added","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"messages":[{"role":"user","content":"Rain in Oslo?"}]}`+"\n")
		f.Close()
		h.fill["FILE"] = h.path("data", "fncall", "prompts.jsonl")
		return "data/fncall"
	}},
	{name: "disk-records-gone", reason: "files_changed", make: func(h *fixRun) string {
		h.must(append(genArgs(h.url, "--export", "conversations"), "data/sharegpt")...)
		os.Remove(h.path("data", "sharegpt", "tokenized.jsonl"))
		h.fill["FILE"] = h.path("data", "sharegpt", "tokenized.jsonl")
		return "data/sharegpt"
	}},
	// vLLM's chat endpoint renders an agent's earlier turns (text and a
	// call) otherwise than it generated them: ids records whose turns
	// carry no loss must be built otherwise or excluded with a reason
	// check counts (issue 50, item 2).
	{name: "ids-loss", reason: "no_turn_loss", make: func(h *fixRun) string {
		h.url = startSimProcess(h.t, h.bin, "--unmarked", "--flavor", "vllm", "--tool-calls", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
		h.must(append(genArgs(h.url), "data/agent")...)
		h.must("export", "--format", "ids", "data/agent")
		out, err := exec.Command(testdataTool(h.t, "seedread"), "-root", h.path("data"), "-ids", h.path("data")).Output()
		if err != nil {
			h.t.Fatalf("seedread: %v", err)
		}
		var truth map[string]seedCounts
		json.Unmarshal(out, &truth)
		c := truth["agent"]
		for r := range c.Excluded {
			if !exportReasons[r] {
				return "data/agent" // an exclusion for the loss: check must count it
			}
		}
		if len(c.NoLoss) == 0 {
			h.t.Skip("every regenerated turn of the ids records carries its loss: nothing to exclude, no reason to fix")
		}
		h.t.Logf("%d ids records hold turns without loss, none is excluded: %v", len(c.NoLoss), c.NoLoss)
		return "data/agent"
	}},
}

// TestCheckFixesClearTheirReasons: per reason, the state, check, its
// printed fix run as written, check again: the reason is gone.
func TestCheckFixesClearTheirReasons(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers; skipped with -short")
	}
	bin := gendexBinary(t)
	t.Parallel()
	gen := testdataTool(t, "seedgen")
	for _, c := range fixCases {
		name := c.name
		if name == "" {
			name = c.reason
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if out, err := exec.Command(gen, "-root", filepath.Join(dir, "data"), "-n", "10").CombinedOutput(); err != nil {
				t.Fatalf("seedgen: %v\n%s", err, out)
			}
			h := &fixRun{t: t, bin: bin, dir: dir, fill: map[string]string{},
				url: startSimProcess(t, bin, "--unmarked", "--tool-calls", "--tool-call-parser", "qwen25")}
			target := c.make(h)
			ds := filepath.Base(target)
			got := h.check(c.args, target, ds)
			r, ok := pickReason(got, c.reason)
			if !ok {
				t.Fatalf("the state (%s) gives no blocking %s for %s: %v", name, orAny(c.reason), ds, got)
			}
			if r.Fix == "" {
				t.Fatalf("%s: check prints no fix: %+v", r.Reason, r)
			}
			db, again := h.runFix(r.Fix, target)
			args := c.args
			if db != "" {
				args = append([]string{"--db", db}, args...)
			}
			after := h.check(args, again, ds)
			if a, still := after[r.Reason]; still && a.Blocks {
				t.Errorf("%s %v: the fix %q ran; check still gives %s %v (was %v)", r.Reason, c.args, r.Fix, a.Reason, a.Count, r.Count)
			}
		})
	}
}

func orAny(r string) string {
	if r == "" {
		return "reason"
	}
	return r
}

// pickReason is the reason the row is about: reason by name, or for a
// disk row a blocking reason that is not about the answers' content (a
// run check called ready before the files changed).
func pickReason(got map[string]checkReason, reason string) (checkReason, bool) {
	if reason != "" {
		r, ok := got[reason]
		return r, ok && r.Blocks
	}
	for _, r := range got {
		switch r.Reason {
		case "think_in_content", "empty_content", "repeated_text", "over_max_length":
			continue // what the answers say, not the disk
		}
		if r.Blocks {
			return r, true
		}
	}
	return checkReason{}, false
}

// check runs check --format json with args on target and returns dataset
// ds's reasons by name.
func (h *fixRun) check(args []string, target, ds string) map[string]checkReason {
	h.t.Helper()
	words := append(append([]string{"check"}, args...), "--format", "json", target)
	code, out, errOut := runGendex(h.t, h.bin, h.dir, words...)
	var v struct {
		Datasets []verdict
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		h.t.Fatalf("gendex %s: exit %d: %v\n%s%s", strings.Join(words, " "), code, err, out, errOut)
	}
	got := map[string]checkReason{}
	for _, d := range v.Datasets {
		if d.Dataset == ds {
			for _, r := range d.Reasons {
				got[r.Reason] = r
			}
		}
	}
	return got
}

var fixCommand = regexp.MustCompile(`gendex (?:'[^']*'|[^,;()'])+`) // a quoted word may hold , ; ( )

// runFix runs a fix as printed: "move P aside" moves P to P.aside, each
// "gendex ..." in it runs with its placeholders filled (the words after a
// command's own, "says how", are prose). A command that refuses and
// recommends commands (lines "    gendex ...") has them run, as a person
// would; when one names --db and --out, check again is theirs: it returns
// that index and the dataset's folder under --out.
func (h *fixRun) runFix(fix, target string) (db, again string) {
	h.t.Helper()
	again = target
	if m := regexp.MustCompile(`move (\S+) aside`).FindStringSubmatch(fix); m != nil {
		if err := os.Rename(m[1], m[1]+".aside"); err != nil {
			h.t.Fatalf("the fix %q: %v", fix, err)
		}
	}
	fill := map[string]string{"URL": h.url}
	for k, v := range h.fill {
		fill[k] = v
	}
	for _, cmd := range fixCommand.FindAllString(fix, -1) {
		cmd, _, _ = strings.Cut(cmd, " says ")
		cmd, into, listing := strings.Cut(cmd, " > ")
		words := shellWords(h.t, strings.TrimSpace(cmd))[1:]
		for i, w := range words {
			if v, ok := fill[w]; ok {
				words[i] = v
			}
		}
		code, out, errOut := runGendex(h.t, h.bin, h.dir, words...)
		if listing {
			// "gendex check --ids REASON DIR > FILE": its output is the
			// file the next command of the fix reads as FILE.
			f := h.path(fmt.Sprintf("listed-%d.txt", len(fill)))
			writeTestFile(h.t, f, out)
			fill[strings.TrimSpace(into)] = f
			if code != 0 || out == "" {
				h.t.Errorf("the fix %q: gendex %s > %s listed nothing: exit %d\n%s", fix, strings.Join(words, " "), into, code, errOut)
			}
			continue
		}
		if code == 0 {
			continue
		}
		rec := recommended(h.t, out+errOut)
		if len(rec) == 0 {
			// Exit 1 may be a complaint about the messy lines (ingest
			// leaves a torn line out): checking again decides. A usage
			// error is a fix that is not a command.
			if code == 2 {
				h.t.Errorf("the fix %q is not a command that runs: gendex %s: exit 2\n%s%s", fix, strings.Join(words, " "), out, errOut)
			} else {
				h.t.Logf("the fix %q: gendex %s: exit %d\n%s%s", fix, strings.Join(words, " "), code, out, errOut)
			}
			continue
		}
		for _, r := range rec[:1] {
			if c, o, e := runGendex(h.t, h.bin, h.dir, r...); c != 0 {
				h.t.Errorf("the fix %q: gendex %s recommends gendex %s: exit %d\n%s%s", fix, strings.Join(words, " "), strings.Join(r, " "), c, o, e)
			}
			for i := 0; i+1 < len(r); i++ {
				switch r[i] {
				case "--db":
					db = r[i+1]
				case "--out":
					again = filepath.Join(r[i+1], filepath.Base(target))
				}
			}
		}
	}
	return db, again
}
