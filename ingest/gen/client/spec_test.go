package client

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSpecFields: the spec fields of /generate's meta_info, under the
// recent names, the earlier ones and a fork's, and of chat's meta_info
// (return_meta_info) or sglext, become the answer line's spec_verify_ct,
// spec_accept_length, spec_accepted_drafts and spec_proposed_drafts, just
// after reasoning_tokens; a server without them, or with spec_verify_ct 0
// (no spec data), gives a line without any.
func TestSpecFields(t *testing.T) {
	const head = `{"text":"ab","output_ids":[1,2,3,4,5,6,7,8,9],"meta_info":{"id":"x","finish_reason":{"type":"length","length":9},"prompt_tokens":3,"reasoning_tokens":0,"completion_tokens":9,"cached_tokens":0,`
	const spec = `"spec_verify_ct":4,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12`
	for _, tc := range []struct {
		name, meta, want string
	}{
		{"recent names", `"spec_accept_rate":0.3333333333333333,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12,"spec_verify_ct":4,"spec_accept_histogram":[1,2,1,0]`, spec},
		{"earlier names", `"spec_accept_rate":0.3333333333333333,"spec_accept_length":2.25,"spec_accept_token_num":4,"spec_draft_token_num":12,"spec_verify_ct":4`, spec},
		{"fork names", `"spec_verify_ct":4,"spec_accept_length":2.25,"spec_num_correct_drafts":4,"spec_num_proposed_drafts":12`, spec},
		{"verify only", `"spec_verify_ct":4`, `"spec_verify_ct":4`},
		{"verify 0 is no data", `"spec_accept_rate":0.0,"spec_accept_length":0,"spec_verify_ct":0`, ""},
		{"none", `"dp_rank":null`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(http.StatusOK, head+tc.meta+`,"e2e_latency":0.5}}`))
			r, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
			if err != nil {
				t.Fatal(err)
			}
			r.FinishedAt, r.Server = time.Time{}, ""
			want := `{"id":"p","output_ids":[1,2,3,4,5,6,7,8,9],"text":"ab","prompt_tokens":3,"completion_tokens":9,"cached_tokens":0,"reasoning_tokens":0,`
			if tc.want != "" {
				want += tc.want + ","
			}
			want += `"finish_reason":"length","matched_stop":null,"e2e_latency":0.5}` + "\n"
			if got := string(r.AppendJSONL(nil, "p")); got != want {
				t.Errorf("\n got %s\nwant %s", got, want)
			}
			if tc.name == "recent names" && (r.Spec.Histogram == nil || *r.Spec.AcceptRate != 1.0/3) {
				t.Errorf("spec %+v: histogram and rate not kept", r.Spec)
			}
		})
	}

	const chatHead = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok","reasoning_content":null},"finish_reason":"stop","matched_stop":2`
	const chatTail = `"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}`
	for _, tc := range []struct{ name, body string }{
		{"chat meta_info", chatHead + `,"meta_info":{"id":"c","completion_tokens":9,"spec_verify_ct":4,"spec_accept_length":2.25,"spec_accept_token_num":4,"spec_draft_token_num":12}}],` + chatTail + `}`},
		{"chat sglext", chatHead + `}],` + chatTail + `,"sglext":{"spec_verify_ct":4,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(http.StatusOK, tc.body))
			r, err := f.client(Options{}).Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "hi"}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(r.AppendJSONL(nil, "p")); !strings.Contains(got, `"completion_tokens":9,`+spec+`,"finish_reason":"stop"`) {
				t.Errorf("line %s lacks %s", got, spec)
			}
		})
	}
}
