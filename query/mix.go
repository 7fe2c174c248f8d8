package query

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gendex/store"
)

// The mix question, and check's mix_share: what share of a dataset's
// answers drew each value of a gen --mix spec, beside the spec's weight.
// The counts come from the answer files' makers (each answer's
// provenance: "mix" holds each key's spec, "drawn" the part the record
// drew), so they are the answers that count (a redo's replaced ones not);
// nothing is read from the files.
//
// The rule for "beyond sampling noise": each value's count c of n
// answers drawn under one spec is binomial(n, w) for its weight w, and is
// off when |c - n w| > mixNoiseZ standard deviations (sqrt(n w (1-w))):
// about one false alarm in 150,000 values of a correct run. A value the
// spec does not have (weight 0: a hand edit, another spec's answers
// relabelled, a prompt sent without a chat template) is off at any count.

// mixNoiseZ is how many standard deviations from its weight a value's
// share may be before check blocks the dataset.
const mixNoiseZ = 4.5

// mixColumns are the mix question's columns.
var mixColumns = []string{"dataset", "key", "value", "weight", "answers", "share", "z", "off", "spec"}

// mixShare is one value of one key's spec in a dataset: its weight in
// the spec (0: not in it) and the answers that drew it, of n under the
// spec.
type mixShare struct {
	key, spec, value string
	weight           float64
	count, n         uint64
}

// z is how many standard deviations the count is from the weight's share
// (+Inf for a value the spec cannot draw).
func (s mixShare) z() float64 {
	sd := math.Sqrt(float64(s.n) * s.weight * (1 - s.weight))
	d := math.Abs(float64(s.count) - float64(s.n)*s.weight)
	if sd == 0 {
		if d == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return d / sd
}

func (s mixShare) off() bool { return s.z() > mixNoiseZ }

// mixShares are the dataset's shares, by key, spec and the spec's order
// of values (values the spec lacks last, by name).
func mixShares(v *store.View, name string) []mixShare {
	type group struct {
		key, spec string
		counts    map[string]uint64
		n         uint64
	}
	var groups []*group
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset != name || f.Stage != store.Raw {
			return nil
		}
		for i, m := range f.Makers {
			n, _ := f.MakerCount(i)
			var p struct {
				Mix   map[string]string `json:"mix"`
				Drawn map[string]string `json:"drawn"`
			}
			if n == 0 || json.Unmarshal(m.Provenance, &p) != nil {
				continue
			}
			for key, spec := range p.Mix {
				i := slices.IndexFunc(groups, func(g *group) bool { return g.key == key && g.spec == spec })
				if i < 0 {
					groups = append(groups, &group{key: key, spec: spec, counts: map[string]uint64{}})
					i = len(groups) - 1
				}
				value, ok := p.Drawn[key]
				if !ok {
					value = "not drawn"
				}
				groups[i].counts[value] += n
				groups[i].n += n
			}
		}
		return nil
	})
	slices.SortFunc(groups, func(a, b *group) int {
		return strings.Compare(a.key+"\x00"+a.spec, b.key+"\x00"+b.spec)
	})
	var out []mixShare
	for _, g := range groups {
		parts := specWeights(g.spec)
		for _, p := range parts {
			out = append(out, mixShare{key: g.key, spec: g.spec, value: p.value, weight: p.weight, count: g.counts[p.value], n: g.n})
			delete(g.counts, p.value)
		}
		for _, value := range sortedKeys(g.counts) {
			out = append(out, mixShare{key: g.key, spec: g.spec, value: value, count: g.counts[value], n: g.n})
		}
	}
	return out
}

// specWeight is one VALUE:WEIGHT of a spec.
type specWeight struct {
	value  string
	weight float64
}

// specWeights reads a --mix spec's values and weights, as gen wrote it
// in the provenance (gen checked it: a part it cannot read is left out,
// and its answers then count as a value the spec lacks).
func specWeights(spec string) []specWeight {
	var out []specWeight
	depth, start := 0, 0
	for i := 0; i <= len(spec); i++ {
		if i < len(spec) {
			switch spec[i] {
			case '(':
				depth++
			case ')':
				depth--
			}
			if spec[i] != ',' || depth != 0 {
				continue
			}
		}
		item := spec[start:i]
		start = i + 1
		j := strings.LastIndexByte(item, ':')
		if j < 0 {
			continue
		}
		w, err := strconv.ParseFloat(strings.TrimSpace(item[j+1:]), 64)
		if err == nil {
			out = append(out, specWeight{strings.TrimSpace(item[:j]), w})
		}
	}
	return out
}

// mixList answers the mix question: a row per value of each key's spec,
// per dataset; a dataset made without --mix has none.
func mixList(v *store.View, names []string, out Sink) error {
	out.Columns(mixColumns)
	for _, name := range names {
		for _, s := range mixShares(v, name) {
			share := pct(s.count, s.n)
			z := any(nil)
			if zz := s.z(); !math.IsInf(zz, 0) {
				z = Fixed{zz, 1}
			}
			if err := out.Row([]any{name, s.key, s.value, Fixed{s.weight, 2}, s.count, share, z, s.off(), s.spec}); err != nil {
				return err
			}
		}
	}
	return nil
}

// mixFindings are check's words on a dataset's mixtures: mix_share,
// blocking, for values beyond sampling noise of their spec, and the
// shares as said in made_by (shares: "temperature 0 15.2% (0.15), ...").
func mixFindings(v *store.View, name, dir string) (off *finding, shares string) {
	var said, offs, specs []string
	var offCount uint64
	for _, s := range mixShares(v, name) {
		if m := "--mix '" + s.key + "=" + s.spec + "'"; !slices.Contains(specs, m) { // gen checked it: no quote in it
			specs = append(specs, m)
		}
		share := "unknown"
		if s.n > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(s.count)/float64(s.n))
		}
		w := fmt.Sprintf("%.2f", s.weight)
		if s.weight == 0 {
			w = "not in the spec"
		}
		said = append(said, fmt.Sprintf("%s=%s %s (%s)", s.key, s.value, share, w))
		if s.off() && float64(s.count) > float64(s.n)*s.weight {
			offCount += s.count // the answers check --ids mix_share lists
		}
		if s.off() {
			offs = append(offs, fmt.Sprintf("%s=%s %d of %d answers, %s, where the spec %s says %s", s.key, s.value, s.count, s.n, share, s.spec, w))
		}
	}
	if len(offs) > 0 {
		off = &finding{reason: ReasonMixShare, blocks: true, count: offCount,
			detail: fmt.Sprintf("shares beyond sampling noise of the --mix spec (more than %.1f standard deviations): %s", mixNoiseZ, strings.Join(offs, "; ")),
			fix: redoFix(ReasonMixShare, dir) + " " + strings.Join(specs, " ") +
				" (the values drawn too often, asked again: a redo draws what the first run drew, by the hash of each id; gendex query mix " + quoteArg(name) + " shows the shares)"}
	}
	return off, strings.Join(said, ", ")
}

// mixShareIDs are the ids of the dataset's answers that drew a value of
// a spec more often than its weight says, beyond sampling noise, or a
// value the spec lacks: asked again, each draws its own value again.
func mixShareIDs(v *store.View, name string) ([]string, error) {
	over := map[string]bool{} // key \x00 spec \x00 value
	for _, s := range mixShares(v, name) {
		if s.off() && float64(s.count) > float64(s.n)*s.weight {
			over[s.key+"\x00"+s.spec+"\x00"+s.value] = true
		}
	}
	if len(over) == 0 {
		return nil, nil
	}
	makers := map[uint32][]store.Maker{}
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset == name && f.Stage == store.Raw {
			makers[f.ID] = f.Makers
		}
		return nil
	})
	type maker struct{ file, i uint32 }
	drewOver := map[maker]bool{}
	var ids []string
	err := v.Each(name, store.Raw, func(r *store.Record) error {
		ms := makers[r.File]
		if r.Maker == 0 || int(r.Maker) > len(ms) {
			return nil
		}
		k := maker{r.File, r.Maker}
		is, ok := drewOver[k]
		if !ok {
			var p struct {
				Mix   map[string]string `json:"mix"`
				Drawn map[string]string `json:"drawn"`
			}
			json.Unmarshal(ms[r.Maker-1].Provenance, &p)
			for key, spec := range p.Mix {
				value, drawn := p.Drawn[key]
				if !drawn {
					value = "not drawn"
				}
				is = is || over[key+"\x00"+spec+"\x00"+value]
			}
			drewOver[k] = is
		}
		if is {
			ids = append(ids, r.ID)
		}
		return nil
	})
	return ids, err
}
