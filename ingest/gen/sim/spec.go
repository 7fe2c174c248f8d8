package sim

// The simulated drafter. With Config.SpecDraftTokens N (SGLang's
// --speculative-num-draft-tokens), every decode step after the first token
// is one verify step (a target forward pass) that checks N-1 draft tokens:
// it accepts the longest prefix of them the target agrees with and lands
// that many tokens plus the target's own (the bonus token). The first
// token comes from prefill, as in SGLang, so an answer of one token took
// no verify step and carries no spec fields.
//
// Each draft token is accepted with a per-prompt probability in
// [specMinAccept, specMinAccept+specAcceptSpread), drawn from the item's
// seed, so answers differ (percentiles mean something) and the same prompt
// always gets the same figures.
const (
	specMinAccept    = 0.45
	specAcceptSpread = 0.45
)

// specStats are one answer's speculative decoding counts, as SGLang's
// scheduler accumulates them: verify steps, draft tokens accepted (over
// every step), draft tokens proposed (verify × (N-1)), and hist[j] = the
// steps that accepted j drafts (SGLang's spec_accept_histogram).
type specStats struct {
	verify, accepted, proposed int
	hist                       []int
}

// spec returns the speculative counts of the first k tokens of p's output
// with n draft tokens per step (n < 2: none). A step that would run past
// the k-th token (a stop, the length limit, an abort) counts only the
// drafts it kept.
func (p *plan) spec(k, n int) specStats {
	var st specStats
	if n < 2 || k < 2 {
		return st
	}
	r := rng{state: p.seed ^ 0x2545F4914F6CDD1D}
	prob := specMinAccept + specAcceptSpread*r.float()
	st.hist = make([]int, n)
	for left := k - 1; left > 0; {
		acc := 0
		for acc < n-1 && r.float() < prob {
			acc++
		}
		acc = min(acc, left-1)
		st.verify++
		st.accepted += acc
		st.hist[acc]++
		left -= acc + 1
	}
	st.proposed = st.verify * (n - 1)
	return st
}

// specMeta is the spec part of meta_info, as SGLang's tokenizer manager
// writes it (_calculate_spec_decoding_metrics): present only when the
// request took a verify step. The counts go by their current names
// (spec_num_correct_drafts, spec_num_proposed_drafts,
// spec_correct_drafts_histogram; SGLang PR #24081) and, as SGLang still
// sends them, by their old ones (spec_accepted_drafts,
// spec_proposed_drafts, spec_accept_histogram) with the same values.
type specMeta struct {
	AcceptRate        float64 `json:"spec_accept_rate"`
	AcceptLength      float64 `json:"spec_accept_length"`
	NumCorrectDrafts  int     `json:"spec_num_correct_drafts"`
	NumProposedDrafts int     `json:"spec_num_proposed_drafts"`
	CorrectHistogram  []int   `json:"spec_correct_drafts_histogram,omitempty"`
	AcceptedDrafts    int     `json:"spec_accepted_drafts"`
	ProposedDrafts    int     `json:"spec_proposed_drafts"`
	VerifyCt          int     `json:"spec_verify_ct"`
	Histogram         []int   `json:"spec_accept_histogram,omitempty"`
}

// specMetaOf returns the spec fields of an answer of completion tokens
// with counts st, or nil when it took no verify step.
func specMetaOf(completion int, st specStats) *specMeta {
	if st.verify == 0 {
		return nil
	}
	return &specMeta{
		AcceptRate:        float64(st.accepted) / float64(st.proposed),
		AcceptLength:      float64(completion) / float64(st.verify),
		NumCorrectDrafts:  st.accepted,
		NumProposedDrafts: st.proposed,
		CorrectHistogram:  st.hist,
		AcceptedDrafts:    st.accepted,
		ProposedDrafts:    st.proposed,
		VerifyCt:          st.verify,
		Histogram:         st.hist,
	}
}
