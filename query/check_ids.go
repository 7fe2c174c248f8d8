package query

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"gendex/store"
)

// The ids behind a reason's count (check --ids REASON): the answers the
// check counts for it, for `gen --redo FILE`. They are collected by the
// same walks that count them, and only when asked.

// IDReasons are the reasons whose answers' ids check --ids lists.
var IDReasons = []string{ReasonEmpty, ReasonThink, ReasonRepeated, ReasonTooLong, ReasonTruncatedKept,
	ReasonMixed, ReasonMixShare, ReasonSimulated, ReasonNoTurnLoss}

// idColumns are check --ids' columns: one row per id (and "sample" after
// them when a dataset named has several samples: gen --samples).
var idColumns = []string{"dataset", "id"}

// idsElsewhere says where the ids of a reason check --ids does not list
// are.
var idsElsewhere = map[string]string{
	ReasonUnanswered: "gendex query missing DATASET lists them",
	ReasonNoRecord:   "gendex query missing DATASET --stage tokenized lists them",
	ReasonFailed:     "gendex query errors DATASET lists them",
}

// checkIDsAsked checks a check's --ids: a reason of IDReasons, and
// over_max_length only with the length it counts records over.
func checkIDsAsked(o CheckOptions) error {
	switch {
	case o.IDs == ReasonTooLong && o.MaxLength <= 0:
		return usageErr("check --ids %s needs --max-length N: the length it counts records over", o.IDs)
	case slices.Contains(IDReasons, o.IDs):
		return nil
	}
	why := "not a reason whose answers check lists"
	if where, ok := idsElsewhere[o.IDs]; ok {
		why = "check does not list them: " + where
	}
	return usageErr("check --ids %q: %s (want one of %s)", o.IDs, why, strings.Join(IDReasons, ", "))
}

// checkIDs answers check --ids: the ids of each dataset's answers the
// check counts for reason o.IDs, as rows of idColumns.
func checkIDs(v *store.View, names []string, o CheckOptions, files map[uint32]*os.File, out Sink) error {
	if err := checkIDsAsked(o); err != nil {
		return err
	}
	sampled := false // a dataset of several samples: each row names its unit's sample
	for _, name := range names {
		s, err := v.Summary(name)
		if err != nil {
			return err
		}
		sampled = sampled || s.Samples() > 1
	}
	cols := idColumns
	if sampled {
		cols = append(cols[:len(cols):len(cols)], "sample")
	}
	out.Columns(cols)
	for _, name := range names {
		ids, err := reasonIDs(v, name, o, files)
		if err != nil {
			return err
		}
		for _, key := range ids {
			row := []any{name, key}
			if sampled {
				id, sample := store.SplitUnit(key)
				row = []any{name, id, sample}
			}
			if err := out.Row(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// reasonIDs are the ids of dataset name's answers the check counts for
// reason o.IDs. A content reason whose checks could not be made is an
// error saying why.
func reasonIDs(v *store.View, name string, o CheckOptions, files map[uint32]*os.File) ([]string, error) {
	switch o.IDs {
	case ReasonSimulated:
		var ids []string
		err := eachAnswerWay(v, name, func(id, _ string, simulated bool) {
			if simulated {
				ids = append(ids, id)
			}
		})
		return ids, err
	case ReasonMixed:
		return mixedIDs(v, name)
	case ReasonMixShare:
		return mixShareIDs(v, name)
	case ReasonNoTurnLoss:
		var ids []string
		err := v.Each(name, store.Excluded, func(r *store.Record) error {
			if r.Finish == ReasonNoTurnLoss {
				ids = append(ids, r.ID)
			}
			return nil
		})
		return ids, err
	}
	rs, err := checkRecords(v, name, o, files)
	if err != nil {
		return nil, err
	}
	switch o.IDs {
	case ReasonEmpty, ReasonThink, ReasonRepeated:
		if !rs.read && rs.records > 0 {
			return nil, fmt.Errorf("check --ids %s: %s: the content checks were not made: %s", o.IDs, name, rs.why)
		}
	}
	if o.IDs == ReasonRepeated {
		return rs.repeatedIDs(), nil
	}
	return rs.ids, nil
}

// mixedIDs are, for a dataset whose answers were made in more than one
// way (mixedModels), the ids of the answers made in any other way than
// the one most of them were made in (the first by name of equals).
func mixedIDs(v *store.View, name string) ([]string, error) {
	if mixed, _, _ := mixedModels(v, name); !mixed {
		return nil, nil
	}
	count := map[string]uint64{}
	if err := eachAnswerWay(v, name, func(_, way string, _ bool) { count[way]++ }); err != nil {
		return nil, err
	}
	most := ""
	for way, n := range count {
		if most == "" || n > count[most] || n == count[most] && way < most {
			most = way
		}
	}
	var ids []string
	err := eachAnswerWay(v, name, func(id, way string, _ bool) {
		if way != most {
			ids = append(ids, id)
		}
	})
	return ids, err
}

// eachAnswerWay calls fn with each of the dataset's answers (an id's
// newest), in id order, with the way its maker made it (makerWay; an
// answer whose maker the index did not keep: unknownWay) and whether the
// simulator made it.
func eachAnswerWay(v *store.View, name string, fn func(id, way string, simulated bool)) error {
	makers := map[uint32][]store.Maker{} // by file id
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset == name && f.Stage == store.Raw {
			makers[f.ID] = f.Makers
		}
		return nil
	})
	type maker struct{ file, i uint32 }
	ways := map[maker]string{}
	widest := widestPromptRules(v, name)
	return v.Each(name, store.Raw, func(r *store.Record) error {
		ms := makers[r.File]
		if r.Maker == 0 || int(r.Maker) > len(ms) {
			fn(r.ID, unknownWay, false)
			return nil
		}
		k := maker{r.File, r.Maker}
		way, ok := ways[k]
		if !ok {
			_, way, _ = makerWay(ms[r.Maker-1], widest)
			ways[k] = way
		}
		fn(r.ID, way, ms[r.Maker-1].Simulated)
		return nil
	})
}
