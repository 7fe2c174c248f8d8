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

// TestCheckMixShareBlocks: answers whose --mix draws are far beyond
// sampling noise of the spec they name (40 of 40 drew a value of weight
// 0.5: a hand edit, a bug) do not pass check: mix_share blocks, counting
// the answers drawn too often. Draws that keep to the spec have no such
// reason.
func TestCheckMixShareBlocks(t *testing.T) {
	root := t.TempDir()
	for _, ds := range []string{"even", "skewed"} {
		var prompts, raw strings.Builder
		for i := 1; i <= 40; i++ {
			fmt.Fprintf(&prompts, `{"id":"p%d","text":"q%d"}`+"\n", i, i)
			drawn := "0"
			if ds == "even" && i%2 == 0 {
				drawn = "1.0"
			}
			fmt.Fprintf(&raw, `{"id":"p%d","text":"a%d","completion_tokens":2,"finish_reason":"stop","model":"m",`+
				`"provenance":{"sampling":{},"mix":{"temperature":"0:0.5,1.0:0.5"},"drawn":{"temperature":%q}}}`+"\n", i, i, drawn)
		}
		writeFile(t, filepath.Join(root, ds, "prompts.jsonl"), prompts.String())
		writeFile(t, filepath.Join(root, ds, "raw_responses.jsonl"), raw.String())
	}
	db, _ := ingesttest.Index(t, root)
	mixShare := func(ds string) (row map[string]any, found bool) {
		t.Helper()
		chk := answer(t, db, time.Now(), "check", ds)
		for _, r := range chk.Rows {
			if chk.Get(r, "reason") == query.ReasonMixShare {
				return map[string]any{"blocks": chk.Get(r, "blocks"), "count": norm(chk.Get(r, "count")), "detail": chk.Get(r, "detail")}, true
			}
		}
		return nil, false
	}
	if r, found := mixShare("skewed"); !found || r["blocks"] != true || r["count"] != int64(40) {
		t.Errorf("40 of 40 drew temperature 0 of weight 0.5: %v (found %v); want mix_share, blocking, 40 answers", r, found)
	}
	if r, found := mixShare("even"); found {
		t.Errorf("20 and 20: %v; want no mix_share", r)
	}
}
