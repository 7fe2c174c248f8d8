package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quickstartCommands returns the commands README's Quickstart gives, in
// order: its indented lines that start with "go run .".
func quickstartCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Quickstart")
	if start < 0 {
		t.Fatal("README.md has no Quickstart section")
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var cmds [][]string
	for _, line := range strings.Split(section, "\n") {
		if rest, ok := strings.CutPrefix(line, "    go run . "); ok {
			cmds = append(cmds, strings.Fields(rest))
		}
	}
	return cmds
}

// TestQuickstartAsWritten runs README's Quickstart commands as written,
// with the binary for "go run .", a temporary folder for /tmp/gendex-demo
// and `gendex sim --unmarked` (a server that does not say it is the
// simulator, as SGLang does not) for the real server's address: the dry
// run makes the simulator's 200 answers, running it again has nothing to
// do and says where they are, and the real run makes its own 200.
func TestQuickstartAsWritten(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	cmds := quickstartCommands(t)
	if len(cmds) != 3 {
		t.Fatalf("README's Quickstart gives %d go run commands, %q; this test knows three (dry run, query, real run)", len(cmds), cmds)
	}
	demo := filepath.Join(p.dir, "gendex-demo")
	real := startSimProcess(t, p.bin, "--unmarked")
	subst := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			a = strings.ReplaceAll(a, "/tmp/gendex-demo", demo)
			a = strings.ReplaceAll(a, "http://127.0.0.1:30000", real)
			a = strings.ReplaceAll(a, "testdata/demo", "demo")
			out[i] = a
		}
		return out
	}
	if strings.Join(cmds[0][:2], " ") != "gen --server" || cmds[0][2] != "sim" || strings.Join(cmds[2][:2], " ") != "gen --server" || cmds[2][2] == "sim" {
		t.Fatalf("the Quickstart's commands are not a dry run, a question and a real run: %q", cmds)
	}
	dry := p.mustRun(subst(cmds[0])...)
	if strings.Contains(dry, "--enable-metrics") {
		t.Errorf("the dry run gives advice about the server's flags that does not apply to the built-in simulator:\n%s", dry)
	}
	if n, sim := p.answers("gendex-demo"); n != 200 || sim != 200 {
		t.Fatalf("the dry run: %d answers, %d the simulator's; want 200 of 200", n, sim)
	}
	p.mustRun(subst(cmds[1])...)
	p.wantRaw("gendex.db", 50)
	again := p.mustRun(subst(cmds[0])...) // "Run it again"
	if !strings.Contains(again, "nothing to do") || !strings.Contains(again, "50 answers in "+filepath.Join(demo, "B1_ids")+" (model sim-model, made by the simulator)") {
		t.Errorf("the dry run again does not say there is nothing to do, and where the answers are:\n%s", again)
	}
	p.mustRun(subst(cmds[2])...)
	if n, sim := p.answers("demo"); n != 200 || sim != 0 {
		t.Fatalf("the real run: %d answers, %d the simulator's; want 200 of its own", n, sim)
	}
	p.wantRaw("gendex.db", 50)
}
