package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// TestGenMixOverridesPromptSampling: a prompt line's own sampling_params
// give way to --mix for the keys it draws (each request carries its
// record's draw, never the line's value), keep the keys it does not draw,
// and the log says so once for every prompt that sets one.
func TestGenMixOverridesPromptSampling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulator")
	}
	bin := gendexBinary(t)
	t.Parallel()
	rec, url := startRecordingProxy(t, simURL(t, sim.Config{Seed: 4, Slots: 16, DecodeTokensPerSec: 100000}))
	root := t.TempDir()
	var b strings.Builder
	for i := range 40 {
		own := ""
		if i%2 == 0 { // half set their own temperature and top_p
			own = `,"sampling_params":{"temperature":0.3,"top_p":0.5}`
		}
		fmt.Fprintf(&b, `{"id":"p%07d","text":"prompt %d"%s}`+"\n", i, i, own)
	}
	writePrompts(t, filepath.Join(root, "S"), b.String())
	out := t.TempDir()
	code, _, stderr := runGendex(t, bin, "", "--db", filepath.Join(out, "g.db"), "gen", "--server", url, "--api", "chat", "--max-new-tokens", "4",
		"--out", out, "--mix", "temperature=0:0.5,1.0:0.5", root)
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "sets temperature in its sampling_params; --mix temperature draws it per record instead"); n != 1 {
		t.Errorf("the log says %d times that a prompt's own temperature gives way to --mix, want once:\n%s", n, stderr)
	}
	answers := 0
	eachJSONLine(t, filepath.Join(out, "S", "raw_responses.jsonl"), func(l []byte) {
		var a struct {
			ID         string
			Provenance struct{ Drawn map[string]string }
		}
		json.Unmarshal(l, &a)
		var i int
		fmt.Sscanf(a.ID, "p%d", &i)
		rec.mu.Lock()
		body := rec.bodies[fmt.Sprintf("prompt %d", i)]
		rec.mu.Unlock()
		answers++
		temp, _ := body["temperature"].(float64)
		if d := a.Provenance.Drawn["temperature"]; body == nil || fmt.Sprint(temp) != strings.TrimSuffix(d, ".0") {
			t.Errorf("%s drew temperature %s; its request sent %v", a.ID, d, body["temperature"])
		}
		if topP, _ := body["top_p"].(float64); i%2 == 0 && topP != 0.5 || i%2 == 1 && body["top_p"] != nil {
			t.Errorf("%s: its request sent top_p %v; want its line's own (0.5 for even ids, none for odd)", a.ID, body["top_p"])
		}
	})
	if answers != 40 {
		t.Errorf("%d answers, want 40", answers)
	}
}
