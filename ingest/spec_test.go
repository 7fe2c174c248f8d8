package ingest

import (
	"testing"

	"gendex/store"
)

// TestNormalizeSpec: the speculative decoding counts are read flat (gen's
// answer lines), from meta_info (SGLang's /generate), from the first
// choice's meta_info (chat with return_meta_info) and from sglext, under
// SGLang's recent and earlier names and a fork's; a conversation line sums
// its turns' counts when every turn has them; a verify count of 0 is no
// data, and a line without them has none.
func TestNormalizeSpec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		line                 string
		verify, acc, propsed int64
	}{
		{"flat (gen)", `{"id":"a","completion_tokens":9,"spec_verify_ct":4,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12}`, 4, 4, 12},
		{"meta_info, recent names", `{"id":"a","meta_info":{"completion_tokens":9,"spec_accept_rate":0.33,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12,"spec_verify_ct":4,"spec_accept_histogram":[1,2,1]}}`, 4, 4, 12},
		{"meta_info, earlier names", `{"id":"a","meta_info":{"completion_tokens":9,"spec_accept_rate":0.33,"spec_accept_length":2.25,"spec_accept_token_num":4,"spec_draft_token_num":12,"spec_verify_ct":4}}`, 4, 4, 12},
		{"meta_info, a fork's names", `{"id":"a","meta_info":{"completion_tokens":9,"spec_num_correct_drafts":4,"spec_num_proposed_drafts":12,"spec_verify_ct":4}}`, 4, 4, 12},
		{"flat earlier names", `{"id":"a","completion_tokens":9,"spec_verify_ct":4.0,"spec_accept_token_num":4,"spec_draft_token_num":12}`, 4, 4, 12},
		{"flat wins over meta_info", `{"id":"a","completion_tokens":9,"spec_verify_ct":4,"meta_info":{"spec_verify_ct":5,"spec_accepted_drafts":1,"spec_proposed_drafts":3}}`, 4, 1, 3},
		{"chat return_meta_info", `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop","meta_info":{"completion_tokens":9,"spec_verify_ct":4,"spec_accept_token_num":4,"spec_draft_token_num":12}}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`, 4, 4, 12},
		{"sglext", `{"id":"c","choices":[{"finish_reason":"stop"}],"usage":{"completion_tokens":9},"sglext":{"spec_verify_ct":4,"spec_accepted_drafts":4,"spec_proposed_drafts":12}}`, 4, 4, 12},
		{"conversation sums its turns", `{"id":"c","turns":[{"completion_tokens":5,"spec_verify_ct":2,"spec_accepted_drafts":2,"spec_proposed_drafts":6},{"completion_tokens":9,"spec_verify_ct":4,"spec_accepted_drafts":4,"spec_proposed_drafts":12}],"completion_tokens":14}`, 6, 6, 18},
		{"conversation with a turn without", `{"id":"c","turns":[{"completion_tokens":1},{"completion_tokens":9,"spec_verify_ct":4,"spec_accepted_drafts":4,"spec_proposed_drafts":12}],"completion_tokens":10}`, 0, 0, 0},
		{"verify 0 is no data", `{"id":"a","meta_info":{"completion_tokens":9,"spec_accept_rate":0.0,"spec_accept_length":0,"spec_verify_ct":0}}`, 0, 0, 0},
		{"accepted above proposed", `{"id":"a","completion_tokens":9,"spec_verify_ct":4,"spec_accepted_drafts":13,"spec_proposed_drafts":12}`, 4, 0, 0},
		{"past the index's limit", `{"id":"a","completion_tokens":9,"spec_verify_ct":4294967297}`, 0, 0, 0},
		{"null and strings", `{"id":"a","completion_tokens":9,"spec_verify_ct":null,"spec_accepted_drafts":"4","spec_proposed_drafts":12}`, 0, 0, 0},
		{"none", `{"id":"a","completion_tokens":9,"finish_reason":"stop"}`, 0, 0, 0},
		{"a turn line (gen)", `{"id":"c","turn":1,"turns":2,"completion_tokens":9,"spec_verify_ct":4}`, 4, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stage := store.Raw
			if tc.name == "a turn line (gen)" {
				stage = store.Turns
			}
			var r store.Record
			if _, err := Normalize([]byte(tc.line), stage, &r); err != nil {
				t.Fatal(err)
			}
			if r.SpecVerify != tc.verify || r.SpecAccepted != tc.acc || r.SpecProposed != tc.propsed {
				t.Errorf("verify %d, accepted %d, proposed %d; want %d, %d, %d", r.SpecVerify, r.SpecAccepted, r.SpecProposed, tc.verify, tc.acc, tc.propsed)
			}
		})
	}
}
