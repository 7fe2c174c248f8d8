package query

import (
	"slices"

	"gendex/store"
)

// stops: per dataset, its tool conversations gen stopped where the model
// departed from the data (tool_stops, as in progress), and how many for
// each reason: the fixed store.ToolStopReasons, each 0 when none stopped
// so (a script's columns do not move with the data), then any other
// reason a line gave, the most common first. list --tool-stop REASON
// lists them.
func stops(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	all := map[string]uint64{}
	for _, s := range sums {
		for k, c := range s.Stage(store.Raw).ToolStops {
			all[k] += c
		}
	}
	reasons := slices.Clone(store.ToolStopReasons)
	for _, k := range sortedKeys(all) {
		if !slices.Contains(reasons, k) {
			reasons = append(reasons, k)
		}
	}
	cols := []string{"dataset", "tool_stops"}
	for _, k := range reasons {
		if k == "dataset" || k == "tool_stops" {
			k = "reason_" + k // keep column names unique
		}
		cols = append(cols, k)
	}
	out.Columns(cols)
	var n uint64
	for _, s := range sums {
		by := s.Stage(store.Raw).ToolStops
		row := []any{s.Dataset, s.ToolStops()}
		for _, k := range reasons {
			row = append(row, by[k])
		}
		n += s.ToolStops()
		if err := out.Row(row); err != nil {
			return err
		}
	}
	total := []any{"TOTAL", n}
	for _, k := range reasons {
		total = append(total, all[k])
	}
	return out.Total(total)
}
