package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkReasons runs `gendex check --format json` (args before the
// folder) in process and returns its exit code and dataset's reasons: each
// one's count and whether it blocks.
func checkReasons(t *testing.T, db, dir string, args ...string) (code int, counts map[string]float64, blocks map[string]bool) {
	t.Helper()
	r := gendex(t, testEnv(nil), append(append([]string{"--db", db, "check", "--format", "json"}, args...), dir)...)
	var v struct {
		Datasets []struct {
			Reasons []struct {
				Reason string
				Blocks bool
				Count  *float64
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Datasets) != 1 {
		t.Fatalf("check --format json: %v\n%s", err, r)
	}
	counts, blocks = map[string]float64{}, map[string]bool{}
	for _, x := range v.Datasets[0].Reasons {
		if x.Count != nil {
			counts[x.Reason] = *x.Count
		}
		blocks[x.Reason] = x.Blocks
	}
	return r.code, counts, blocks
}

// progressNoPrompt is `query progress`'s no_prompt of the one dataset
// (nil: unknown).
func progressNoPrompt(t *testing.T, db string) any {
	t.Helper()
	var rows []map[string]any
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json")
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("query progress: %v\n%s", err, r.stdout)
	}
	return rows[0]["no_prompt"]
}

// TestAnswersWithoutPromptCounted: answers whose id matches no prompt are
// counted by progress (no_prompt) and named by check, which blocks on
// them: export makes no record of them, so no_record leaves them out
// (its fix, export, could never clear them: the loop of issue 49). Made
// two ways on multi-turn ShareGPT: another --id let through with
// --allow-mixed (the answers made under the old ids are left without a
// prompt, their records from before still among the records), and
// prompts taken out of the prompts file. Each fix check prints clears it:
// the prompts given back and indexed, or check --allow-no-prompt.
func TestAnswersWithoutPromptCounted(t *testing.T) {
	t.Parallel()
	t.Run("another id rule", func(t *testing.T) {
		dir := writeDataset(t, "sg", sharegptLines(1, 4))
		db := filepath.Join(t.TempDir(), "g.db")
		mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", dir)
		mustGendex(t, testEnv(nil), "--db", db, "export", dir)
		if n := progressNoPrompt(t, db); n != 0.0 {
			t.Errorf("no_prompt %v before the id rule changed; want 0", n)
		}
		mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--id", "meta.uid", "--allow-mixed", dir)
		gendex(t, testEnv(nil), "--db", db, "export", dir) // the new answers' records
		if n := progressNoPrompt(t, db); n != 4.0 {
			t.Errorf("no_prompt %v after --id meta.uid; want the 4 answers made under the old ids", n)
		}
		code, counts, blocks := checkReasons(t, db, dir, "--allow-mixed")
		if code != 1 || counts["no_prompt"] != 4 || !blocks["no_prompt"] || counts["no_record"] != 0 {
			t.Errorf("check: exit %d, reasons %v; want no_prompt 4 blocking, no no_record", code, counts)
		}
		code, counts, blocks = checkReasons(t, db, dir, "--allow-mixed", "--allow-no-prompt") // the fix it prints
		if counts["no_prompt"] != 4 || blocks["no_prompt"] {
			t.Errorf("check --allow-no-prompt: exit %d, reasons %v; want no_prompt 4 a note", code, counts)
		}
	})
	t.Run("prompts gone", func(t *testing.T) {
		lines := sharegptLines(1, 5)
		dir := writeDataset(t, "sg", lines)
		db := filepath.Join(t.TempDir(), "g.db")
		mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", dir)
		prompts := filepath.Join(dir, "prompts.jsonl")
		os.WriteFile(prompts, []byte(strings.Join(lines[:3], "\n")+"\n"), 0o644)
		mustGendex(t, testEnv(nil), "--db", db, "ingest", dir)
		if n := progressNoPrompt(t, db); n != 2.0 {
			t.Errorf("no_prompt %v after 2 prompts left the file; want 2", n)
		}
		code, counts, blocks := checkReasons(t, db, dir)
		if code != 1 || counts["no_prompt"] != 2 || !blocks["no_prompt"] || counts["no_record"] != 3 {
			t.Errorf("check: exit %d, reasons %v; want no_prompt 2 blocking, no_record 3 (the answers export can make records of)", code, counts)
		}
		os.WriteFile(prompts, []byte(strings.Join(lines, "\n")+"\n"), 0o644) // given back
		mustGendex(t, testEnv(nil), "--db", db, "ingest", dir)
		if n := progressNoPrompt(t, db); n != 0.0 {
			t.Errorf("no_prompt %v once the prompts are back; want 0", n)
		}
		if _, counts, _ := checkReasons(t, db, dir); counts["no_prompt"] != 0 || counts["no_record"] != 5 {
			t.Errorf("check once the prompts are back: %v; want no no_prompt, no_record 5", counts)
		}
	})
}
