package client

import (
	"bytes"
	"encoding/json"
	"testing"
)

func encoderOf(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameBody checks that encodeBody writes a /generate body byte for byte
// as encoding/json's Encoder does.
func sameBody(t *testing.T, g *generateBody) {
	t.Helper()
	got, err := encodeBody(g)
	if err != nil {
		t.Fatal(err)
	}
	if want := encoderOf(t, g); !bytes.Equal(got, want) {
		t.Fatalf("encodeBody:\n%s\nencoding/json:\n%s", got, want)
	}
}

// TestEncodeBodyIsEncodingJSON: every /generate body, with ids or text
// (HTML, quotes, non-ASCII, invalid UTF-8), with and without sampling
// params, is the Encoder's bytes.
func TestEncodeBodyIsEncodingJSON(t *testing.T) {
	mx, temp, seed := 128, 0.7, int64(-3)
	text := func(s string) *string { return &s }
	for _, g := range []*generateBody{
		{RID: "gendex-1", InputIDs: []int{1, 2, 3, 0, -1, 1 << 40}},
		{RID: "gendex-2", Text: text(`<b>"quoted" & é ` + "\xff\u2028"), SamplingParams: SamplingParams{MaxNewTokens: &mx, Temperature: &temp,
			Stop: Strings{"<|im_end|>", "\n"}, SamplingSeed: &seed, LogitBias: map[string]float64{"12": -1, "3": 2.5}}},
		{RID: `r"id<>`, Text: text("")},
		{RID: "", InputIDs: []int{}},
	} {
		sameBody(t, g)
	}
	// Anything that is not a /generate body goes to the Encoder itself.
	other := map[string]any{"model": "m", "messages": []any{map[string]string{"role": "user", "content": "<hi>"}}}
	got, err := encodeBody(other)
	if err != nil || !bytes.Equal(got, encoderOf(t, other)) {
		t.Errorf("another body: %s, %v", got, err)
	}
}

func FuzzEncodeBody(f *testing.F) {
	f.Add("gendex-1", "hello <world>", []byte{1, 2, 3}, 16)
	f.Add("", "", []byte{}, 0)
	f.Fuzz(func(t *testing.T, rid, txt string, ids []byte, max int) {
		g := &generateBody{RID: rid, SamplingParams: SamplingParams{MaxNewTokens: &max}}
		if len(ids)%2 == 0 {
			g.Text = &txt
		}
		for _, b := range ids {
			g.InputIDs = append(g.InputIDs, int(b)*int(b)-100)
		}
		sameBody(t, g)
	})
}
