package query

import (
	"fmt"
	"slices"
	"strings"

	"gendex/store"
)

// spec: the drafter's figures per dataset, from the answers that carry
// SGLang's speculative decoding fields. verify_steps is Σ spec_verify_ct
// and accept_length Σ completion_tokens / Σ spec_verify_ct, over the
// answers with both counts (not a mean of the per-answer ratios, which
// would weigh a 3-token answer as much as a 3,000-token one); accept_rate
// is Σ accepted / Σ proposed drafts over the answers with both; the
// percentiles are of the per-answer accept length, exact at 0.01 (nearest
// rank over a maintained histogram of completion / verify in hundredths,
// rounded half up); unknown_spec counts the answers without a verify
// count. A dataset with no such answer has every figure unknown, never 0.
func spec(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	out.Columns([]string{"dataset", "records", "verify_steps", "accept_length", "accept_rate",
		"p10_accept_length", "p50_accept_length", "p90_accept_length", "unknown_spec"})
	var all sumHist
	var tot store.Stats
	var none []string // datasets whose answers carry no counts
	for _, s := range sums {
		r := s.Stage(store.Raw)
		var h sumHist
		v.SpecHistogram(s.Dataset, func(base int64, counts []int64) {
			for i, c := range counts {
				if c > 0 {
					h.add(base+int64(i), c)
					all.add(base+int64(i), c)
				}
			}
		})
		if err := out.Row(specRow(s.Dataset, &r, &h)); err != nil {
			return err
		}
		if r.Records > 0 && r.SpecVerify == 0 {
			none = append(none, s.Dataset)
		}
		tot.Records += r.Records
		tot.SpecRecords += r.SpecRecords
		tot.SpecTokens += r.SpecTokens
		tot.SpecVerify += r.SpecVerify
		tot.SpecAccepted += r.SpecAccepted
		tot.SpecProposed += r.SpecProposed
	}
	if err := out.Total(specRow("TOTAL", &tot, &all)); err != nil {
		return err
	}
	if len(none) > 0 {
		return out.Note(noSpecNote(none))
	}
	return nil
}

// noSpecNote says why datasets have no per-dataset figures, and where the
// server-wide one is.
func noSpecNote(names []string) string {
	which := "their answers carry"
	if len(names) == 1 {
		which = "its answers carry"
	}
	return fmt.Sprintf("%s: unknown: %s no per-request speculative counts (SGLang's /generate answers have them; vLLM's and llama.cpp's never do, nor SGLang's chat endpoint). "+
		"The server-wide accept length over a window, from the server's own counters: gendex query server --window 1h, or gendex query series --servers (gendex plot accept draws it)",
		strings.Join(names, ", "), which)
}

func specRow(name string, r *store.Stats, h *sumHist) []any {
	var verify, length, rate any
	if r.SpecVerify > 0 {
		verify = r.SpecVerify
		length = AcceptLength(r.SpecTokens, r.SpecVerify)
	} else if r.Records == 0 {
		verify = uint64(0)
	}
	if r.SpecProposed > 0 {
		rate = Fixed{float64(r.SpecAccepted) / float64(r.SpecProposed), 3}
	}
	p := h.nearestRanks(10, 50, 90)
	row := []any{name, r.Records, verify, length, rate}
	for _, bin := range p {
		if bin < 0 {
			row = append(row, nil)
		} else {
			row = append(row, Fixed{float64(bin) / 100, 2})
		}
	}
	return append(row, r.UnknownSpec())
}

// AcceptLength is Σ completion tokens / Σ verify steps as shown (two
// decimals), or nil (unknown) when there is no verify step.
func AcceptLength(tokens, verify uint64) any {
	if verify == 0 {
		return nil
	}
	return Fixed{float64(tokens) / float64(verify), 2}
}

// nearestRanks returns, for each percentage q, the value at rank
// ceil(q × n / 100) of the histogram's n values in increasing order
// (nearest rank, in integers), or -1 when it is empty.
func (h *sumHist) nearestRanks(qs ...int64) []int64 {
	out := make([]int64, len(qs))
	ranks := make([]int64, len(qs))
	for i, q := range qs {
		out[i] = -1
		ranks[i] = max(1, (q*h.n+99)/100)
	}
	if h.n == 0 {
		return out
	}
	i, seen := 0, int64(0)
	visit := func(v, c int64) {
		seen += c
		for i < len(qs) && seen >= ranks[i] {
			out[i] = v
			i++
		}
	}
	for v, c := range h.dense {
		if c > 0 {
			visit(int64(v), c)
		}
	}
	if len(h.sparse) > 0 {
		big := make([]int64, 0, len(h.sparse))
		for v := range h.sparse {
			big = append(big, v)
		}
		slices.Sort(big)
		for _, v := range big {
			visit(v, h.sparse[v])
		}
	}
	return out
}
