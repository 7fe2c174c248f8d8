package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The mistakes a new user makes are answered with what was meant.

func TestServerWithoutScheme(t *testing.T) {
	t.Parallel()
	r := gendex(t, testEnv(nil), "gen", "--server", "127.0.0.1:8000", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "did you mean --server http://127.0.0.1:8000?") {
		t.Errorf("gen --server 127.0.0.1:8000: exit %d\n%s\nwant exit 2 at once, naming http://127.0.0.1:8000", r.code, r.stderr)
	}
	r = gendex(t, testEnv(nil), "gen", "--server", "user:secret@gpu1:8000", t.TempDir())
	if r.code != 2 || strings.Contains(r.stderr, "secret") {
		t.Errorf("a URL with credentials and no scheme: exit %d, and its password must not be printed:\n%s", r.code, r.stderr)
	}
}

func TestMistypedFlag(t *testing.T) {
	t.Parallel()
	r := gendex(t, testEnv(nil), "gen", "--max-new-token", "5", "--server", "sim", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "(did you mean --max-new-tokens?)") {
		t.Errorf("gen --max-new-token 5: exit %d\n%s\nwant exit 2 naming --max-new-tokens", r.code, r.stderr)
	}
	r = gendex(t, testEnv(nil), "query", "progress", "--fromat", "json")
	if r.code != 2 || !strings.Contains(r.stderr, "(did you mean --format?)") {
		t.Errorf("query progress --fromat json: exit %d\n%s\nwant exit 2 naming --format", r.code, r.stderr)
	}
}

// TestNoIndexHere: a question asked in a folder with no index names the
// absolute path it looked for and how to ask another, instead of inviting
// a second index in the wrong place.
func TestNoIndexHere(t *testing.T) {
	t.Parallel()
	bin := gendexBinary(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runGendex(t, bin, dir, "query", "progress")
	out := stdout + stderr
	for _, want := range []string{"no index at " + filepath.Join(dir, "gendex.db"), "--db PATH", "$GENDEX_DB"} {
		if code == 0 || !strings.Contains(out, want) {
			t.Errorf("query progress with no index here (exit %d) does not say %q:\n%s", code, want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gendex.db")); !os.IsNotExist(err) {
		t.Errorf("a question made an index: %v", err)
	}
}

// TestFolderMistakes: a folder that does not exist names the one nearest
// it, and the parent of the datasets' root names the root.
func TestFolderMistakes(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "data")
	writeIDPrompts(t, filepath.Join(root, "D"), "D", 3)
	r := gendex(t, testEnv(nil), "gen", "--server", "sim", filepath.Join(parent, "dat"))
	if r.code != 1 || !strings.Contains(r.stderr, "no such file or folder (did you mean "+root+"?)") {
		t.Errorf("gen over a folder that does not exist: exit %d\n%s\nwant it to name %s", r.code, r.stderr, root)
	}
	r = gendex(t, testEnv(nil), "gen", "--server", "sim", parent)
	if r.code != 1 || !strings.Contains(r.stderr, "did you mean "+root+"?") {
		t.Errorf("gen over the parent of the datasets' root: exit %d\n%s\nwant it to name %s", r.code, r.stderr, root)
	}
}
