package format

import (
	"strings"
	"testing"

	"gendex/query"
	"gendex/store/terminal"
)

// TestShortHeadersLegend: a table whose headers were shortened to fit says,
// under it, what each short header it shows stands for, within the width,
// and only those: not a column it dropped, nor one it does not have; a
// table that fits with its full headers has no legend.
func TestShortHeadersLegend(t *testing.T) {
	cols := []string{"dataset", "prompts", "raw", "tokenized", "errors", "missing_raw", "missing_tokenized", "done_pct", "excluded"}
	row := []any{"demo", uint64(4), uint64(10), uint64(1), uint64(1), uint64(3), uint64(10), query.Fixed{V: 25, Prec: 2}, uint64(2)}
	render := func(width int) string {
		var b strings.Builder
		w := NewWriter(&b, Options{Format: query.Table, Width: width, Layout: "progress"})
		w.Columns(cols)
		w.Row(row)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if out := render(200); strings.Contains(out, " = ") {
		t.Errorf("a table that fits has a legend:\n%s", out)
	}
	for _, width := range []int{40, 60, 76} {
		out := render(width)
		legend := out[strings.Index(out, "\n")+1:]
		legend = legend[strings.Index(legend, "\n")+1:]
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if terminal.Width(strings.TrimRight(l, " ")) > width {
				t.Errorf("width %d: a line of %d columns: %q", width, terminal.Width(l), l)
			}
		}
		head := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		for _, short := range []string{"tok", "err", "to_go", "miss_tok", "done%", "excl"} {
			shown := false
			for _, h := range head {
				shown = shown || h == short
			}
			if said := strings.Contains(legend, short+" = "); said != shown {
				t.Errorf("width %d: header %s shown %v, in the legend %v:\n%s", width, short, shown, said, out)
			}
		}
		if strings.Contains(legend, "trunc =") || strings.Contains(legend, "skip =") {
			t.Errorf("width %d: the legend names a column the table does not have:\n%s", width, out)
		}
	}
}
