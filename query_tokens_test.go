package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryTokensNotesSamplesOnce: query tokens over datasets of several
// samples per prompt says once per samples count which datasets count a
// prompt's tokens that many times (every seed shape at --samples 3, one
// dataset at --samples 2), not once per dataset.
func TestQueryTokensNotesSamplesOnce(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seeds := filepath.Join(p.dir, "seeds")
	seedShapes(t, seeds)
	p.mustRun(append(append([]string{"--db", "t.db"}, simToolArgs...), "--samples", "3", "--seed", "7", seeds)...)
	two := filepath.Join(p.dir, "two")
	writeIDPrompts(t, filepath.Join(two, "O"), "O", 10)
	p.mustRun("--db", "t.db", "gen", "--server", "sim", "--samples", "2", "--seed", "7", two)
	code, _, stderr := runGendex(t, p.bin, p.dir, "--db", "t.db", "query", "tokens")
	if code != 0 {
		t.Fatalf("query tokens: exit %d\n%s", code, stderr)
	}
	want := []string{
		"note: O has 2 samples per prompt: its prompt_tokens sum each sample's request, its prompt counted 2 times, as the server did",
		"note: 5 datasets (chat, fncall, glaive and 2 more) have 3 samples per prompt: their prompt_tokens sum each sample's request, a prompt counted 3 times, as the server did",
	}
	if got := strings.Split(strings.TrimSpace(stderr), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("query tokens says\n%s\nwant\n%s", stderr, strings.Join(want, "\n"))
	}
}
