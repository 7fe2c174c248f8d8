package gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScanDatasetBounded: a large set's lines are read for their shape up
// to scanBytes once a line gen can send is seen (the rest are counted as
// they are sent), but to the end while none is, so a set gen cannot send
// is still refused whatever its size, and one whose first sendable line
// comes late is not.
func TestScanDatasetBounded(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat("y", 1000)
	n := scanBytes/1000 + 2000 // over scanBytes
	for _, tc := range []struct {
		name       string
		line       func(i int) string
		partial    bool
		lines      int64
		sendable   int64
		unsendable int64
	}{
		{"all text", func(i int) string { return fmt.Sprintf(`{"id":"a%d","text":"%s"}`, i, pad) }, true, -1, -1, 0},
		{"none sendable", func(i int) string { return fmt.Sprintf(`{"id":"b%d","prompt":"%s"}`, i, pad) }, false, int64(n), 0, int64(n)},
		{"sendable last", func(i int) string {
			if i == n {
				return fmt.Sprintf(`{"id":"c%d","text":"last"}`, i)
			}
			return fmt.Sprintf(`{"id":"c%d","prompt":"%s"}`, i, pad)
		}, false, int64(n), 1, int64(n - 1)},
	} {
		dir := filepath.Join(t.TempDir(), "S")
		os.MkdirAll(dir, 0o755)
		var b bytes.Buffer
		for i := 1; i <= n; i++ {
			b.WriteString(tc.line(i) + "\n")
		}
		path := filepath.Join(dir, "prompts.jsonl")
		os.WriteFile(path, b.Bytes(), 0o644)
		sc, err := scanDataset(Dataset{Name: "S", Prompts: []string{path}}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sc.partial != tc.partial {
			t.Errorf("%s: partial %v; want %v", tc.name, sc.partial, tc.partial)
		}
		if tc.partial && (sc.lines >= int64(n) || sc.lines*int64(len(tc.line(n))+1) < scanBytes) {
			t.Errorf("%s: %d lines of %d read; want about %d bytes' worth", tc.name, sc.lines, n, scanBytes)
		}
		if tc.lines >= 0 && (sc.lines != tc.lines || sc.sendable() != tc.sendable || sc.unsendable() != tc.unsendable) {
			t.Errorf("%s: %d lines, %d sendable, %d not; want %d, %d, %d", tc.name, sc.lines, sc.sendable(), sc.unsendable(), tc.lines, tc.sendable, tc.unsendable)
		}
	}
}
