package client

// Spec is what a server running speculative decoding reports per answer
// (SGLang's meta_info, ../shared/sglang-api.md §1.3). A nil field is one
// the server did not send.
type Spec struct {
	// VerifyCt is spec_verify_ct: the verify steps (target forward
	// passes) the answer took.
	VerifyCt *int
	// AcceptLength is spec_accept_length, completion_tokens / VerifyCt as
	// the server computed it.
	AcceptLength *float64
	// AcceptRate is spec_accept_rate: AcceptedDrafts / ProposedDrafts.
	AcceptRate *float64
	// AcceptedDrafts and ProposedDrafts are spec_accepted_drafts and
	// spec_proposed_drafts (spec_accept_token_num and spec_draft_token_num
	// in earlier SGLang versions, spec_num_correct_drafts and
	// spec_num_proposed_drafts in some forks).
	AcceptedDrafts, ProposedDrafts *int
	// Histogram is spec_accept_histogram: Histogram[j] verify steps
	// accepted j draft tokens. Kept, not written to answer lines.
	Histogram []int
}

// specFields are the spec keys of a meta_info (or sglext) object, under
// every naming.
type specFields struct {
	VerifyCt       *int     `json:"spec_verify_ct"`
	AcceptLength   *float64 `json:"spec_accept_length"`
	AcceptRate     *float64 `json:"spec_accept_rate"`
	AcceptedDrafts *int     `json:"spec_accepted_drafts"`
	ProposedDrafts *int     `json:"spec_proposed_drafts"`
	AcceptTokenNum *int     `json:"spec_accept_token_num"`
	DraftTokenNum  *int     `json:"spec_draft_token_num"`
	CorrectDrafts  *int     `json:"spec_num_correct_drafts"`
	NumProposed    *int     `json:"spec_num_proposed_drafts"`
	Histogram      []int    `json:"spec_accept_histogram"`
}

// spec returns the fields as a Spec, or nil when there are none. A
// spec_verify_ct of 0 means no spec data (some SGLang versions write
// spec_accept_rate 0 and spec_accept_length 0 before checking it), so
// then nothing is kept.
func (f *specFields) spec() *Spec {
	if f == nil || (f.VerifyCt != nil && *f.VerifyCt <= 0) {
		return nil
	}
	s := &Spec{VerifyCt: f.VerifyCt, AcceptLength: f.AcceptLength, AcceptRate: f.AcceptRate,
		AcceptedDrafts: first(f.AcceptedDrafts, f.AcceptTokenNum, f.CorrectDrafts),
		ProposedDrafts: first(f.ProposedDrafts, f.DraftTokenNum, f.NumProposed),
		Histogram:      f.Histogram}
	if s.VerifyCt == nil && s.AcceptLength == nil && s.AcceptRate == nil && s.AcceptedDrafts == nil && s.ProposedDrafts == nil && s.Histogram == nil {
		return nil
	}
	return s
}

func first(vs ...*int) *int {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}
