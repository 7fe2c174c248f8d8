package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// generateBodies are /generate answers as SGLang writes them, and the odd
// ones a server could send.
var generateBodies = []string{
	`{"text":"Hello there","output_ids":[9906,1070,2],"meta_info":{"id":"r1","finish_reason":{"type":"stop","matched":2},"prompt_tokens":12,"completion_tokens":3,"cached_tokens":0,"e2e_latency":0.12}}`,
	`{"text":"cut","output_ids":[1,2,3],"meta_info":{"finish_reason":{"type":"length","length":3},"prompt_tokens":5,"completion_tokens":3,"spec_verify_ct":2,"spec_accept_length":1.5}}`,
	`{"text":null,"output_ids":null,"meta_info":null}`,
	`{"output_ids":[],"text":"","meta_info":{}}`,
	` { "text" : "\u00e9t\u00e9 \ud83d\ude00" , "output_ids" : [ 0 , -1 , 42 ] } `,
	`{"text":"caf` + "\xc3\xa9" + `","output_ids":[7]}`,
	`{"text":"bad` + "\xff" + `utf8","output_ids":[7]}`,
	`{"Text":"case","OUTPUT_IDS":[5],"Meta_Info":{"prompt_tokens":1}}`,
	`{"text":"a","text":"b","output_ids":[1],"output_ids":[2,3]}`,
	`{"meta_info":{"prompt_tokens":1},"meta_info":{"completion_tokens":2}}`,
	`{"output_ids":[1.5]}`,
	`{"output_ids":[1e3]}`,
	`{"output_ids":[01]}`,
	`{"output_ids":[99999999999999999999]}`,
	`{"output_ids":["1"]}`,
	`{"text":5}`,
	`{"meta_info":{"prompt_tokens":"x"}}`,
	`{"text":"x"} trailing`,
	`{"text":"x"`,
	`[1,2]`,
	``,
	`{"extra":{"deep":[1,2,{"a":null}]},"text":"ok","output_ids":[3]}`,
	`{"meta_info":{"finish_reason":{"type":"stop","matched":null},"e2e_latency":1e-3,"cached_tokens":null}}`,
	`{"meta_info":{"finish_reason":{"type":"stop","matched":"</s>","type":null},"finish_reason":{"message":"m"}}}`,
	`{"meta_info":{"finish_reason":{"type":"abort","message":"gone","status_code":503}}}`,
	`{"meta_info":{"finish_reason":null,"prompt_tokens":-0,"e2e_latency":-2.5E+2,"spec_accept_histogram":[0,3,1]}}`,
	`{"meta_info":{"finish_reason":"stop"}}`,
	`{"meta_info":{"prompt_tokens":1.0}}`,
	`{"meta_info":{"e2e_latency":1e999}}`,
	`{"meta_info":{"e2e_latency":"0.1"}}`,
	`{"meta_info":{"Prompt_Tokens":4,"spec_VERIFY_ct":2}}`,
	`{"meta_info":{"fin\u0069sh_reason":{"typ\u0065":"length"}}}`,
	`{"meta_info":{"spec_verify_ct":3,"spec_accept_length":2.25,"spec_accept_rate":0.6,"spec_accepted_drafts":4,"spec_proposed_drafts":9,"spec_accept_token_num":1,"spec_draft_token_num":2,"spec_num_correct_drafts":3,"spec_num_proposed_drafts":5}}`,
	`{"meta_info":[]}`,
}

// TestDecodeGenerateIsEncodingJSON: the fast reading of a /generate
// answer gives what encoding/json gives, answer and error alike.
func TestDecodeGenerateIsEncodingJSON(t *testing.T) {
	for _, b := range generateBodies {
		sameAsEncodingJSON(t, []byte(b))
	}
}

func sameAsEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	var want, got generateResponse
	wantErr := json.NewDecoder(bytes.NewReader(body)).Decode(&want)
	gotErr := decodeGenerate(body, &got)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("%q: error %v, encoding/json's %v", body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(norm(want), norm(got)) {
		t.Fatalf("%q:\n got %s\nwant %s", body, dump(got), dump(want))
	}
}

// norm makes an empty and a nil id list the same (encoding/json keeps a
// nil list for []; both are "no ids").
func norm(r generateResponse) generateResponse {
	if len(r.OutputIDs) == 0 {
		r.OutputIDs = nil
	}
	return r
}

func dump(r generateResponse) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func FuzzDecodeGenerate(f *testing.F) {
	for _, b := range generateBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameAsEncodingJSON(t, body)
	})
}

// BenchmarkDecodeGenerate: one /generate answer of 128 tokens, as gen
// reads each: the fast reading against encoding/json's.
func BenchmarkDecodeGenerate(b *testing.B) {
	ids := make([]string, 128)
	for i := range ids {
		ids[i] = fmt.Sprint(300 + i*7)
	}
	body := []byte(`{"text":"` + strings.Repeat("word ", 100) + `","output_ids":[` + strings.Join(ids, ",") +
		`],"meta_info":{"id":"0b3c","finish_reason":{"type":"length","length":128},"prompt_tokens":32,"completion_tokens":128,"cached_tokens":0,"e2e_latency":0.001}}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var r generateResponse
			if err := decodeGenerate(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var r generateResponse
			if err := json.NewDecoder(bytes.NewReader(body)).Decode(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
