package query_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
)

// TestCheckBlocksSimulated: answers the simulator made (their lines say
// "simulated": true) are no dataset to train on: check's simulated reason
// blocks, counting them, its fix a gen with the model's server; with
// --allow-simulated it is a note. A model's answers have no such reason.
func TestCheckBlocksSimulated(t *testing.T) {
	root := t.TempDir()
	for _, ds := range []string{"sim", "real"} {
		var prompts, raw strings.Builder
		for i := 1; i <= 4; i++ {
			fmt.Fprintf(&prompts, `{"id":"p%d","text":"q%d"}`+"\n", i, i)
			mark := ""
			if ds == "sim" {
				mark = `,"simulated":true`
			}
			fmt.Fprintf(&raw, `{"id":"p%d","text":"a%d","completion_tokens":2,"finish_reason":"stop","model":"m"%s}`+"\n", i, i, mark)
		}
		writeFile(t, filepath.Join(root, ds, "prompts.jsonl"), prompts.String())
		writeFile(t, filepath.Join(root, ds, "raw_responses.jsonl"), raw.String())
	}
	db, _ := ingesttest.Index(t, root)
	simulated := func(args ...string) (row map[string]any, found bool) {
		t.Helper()
		chk := answer(t, db, time.Now(), append([]string{"check"}, args...)...)
		for _, r := range chk.Rows {
			if chk.Get(r, "reason") == query.ReasonSimulated {
				return map[string]any{"blocks": chk.Get(r, "blocks"), "count": norm(chk.Get(r, "count")), "fix": chk.Get(r, "fix")}, true
			}
		}
		return nil, false
	}
	if r, found := simulated("sim"); !found || r["blocks"] != true || r["count"] != int64(4) || !strings.Contains(fmt.Sprint(r["fix"]), "gendex gen --server URL") {
		t.Errorf("the simulator's answers: %v (found %v); want simulated, blocking, 4 answers, fixed by gen with the model's server", r, found)
	}
	if r, found := simulated("--allow-simulated", "sim"); !found || r["blocks"] == true {
		t.Errorf("--allow-simulated: %v (found %v); want a note", r, found)
	}
	if r, found := simulated("real"); found {
		t.Errorf("a model's answers: %v; want no simulated reason", r)
	}
}
