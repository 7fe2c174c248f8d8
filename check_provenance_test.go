package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCountsAnswersNotLines: 50 prompts answered by model-one, 5 of
// them asked again of model-two (--allow-mixed): check names each model
// with the answers that count, 45 and 5 (the 5 replaced lines of
// model-one's not among them), 50 in all. Once model-two has answered
// every id again the dataset is made one way: ready, and a resume
// against model-two is not refused for the answers model-one made.
func TestCheckCountsAnswersNotLines(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	one := startSimProcess(t, p.bin, "--model", "model-one")
	two := startSimProcess(t, p.bin, "--model", "model-two")
	ds := filepath.Join("demo", "B2_text")
	p.mustRun("gen", "--server", one, "--max-new-tokens", "16", ds)
	redo := func(from, to int) {
		t.Helper()
		var ids strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&ids, "B2_text-%05d\n", i)
		}
		list := filepath.Join(p.dir, fmt.Sprintf("redo-%d.txt", from))
		if err := os.WriteFile(list, []byte(ids.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		p.mustRun("gen", "--server", two, "--max-new-tokens", "16", "--allow-mixed", "--redo", list, ds)
		p.mustRun("export", ds)
	}
	redo(1, 5)
	code, reasons, out := p.checkJSON(ds)
	if code != 1 || reasons["B2_text"]["mixed_provenance"] != 50 || !strings.Contains(out, ": 45 answers") || !strings.Contains(out, ": 5 answers") {
		t.Errorf("check after 5 of model-one's 50 answers were made again by model-two: exit %d; want 1, mixed_provenance 50: model-one 45 answers, model-two 5\n%s", code, out)
	}
	redo(6, 50)
	code, reasons, out = p.checkJSON("--allow-simulated", ds)
	if code != 0 || reasons["B2_text"]["made_by"] != 50 || reasons["B2_text"]["mixed_provenance"] != 0 || strings.Contains(out, "model-one") {
		t.Errorf("check after model-two made every answer again: exit %d; want 0, made_by 50, model-one's replaced answers not counted\n%s", code, out)
	}
	f, err := os.OpenFile(filepath.Join(p.dir, ds, "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"id": "B2_text-00051", "text": "Write about one added prompt."}`+"\n")
	f.Close()
	if code, errOut := p.run("gen", "--server", two, "--max-new-tokens", "16", ds); code != 0 {
		t.Errorf("a resume against model-two, which made every answer that counts: exit %d, want 0\n%s", code, errOut)
	}
}
