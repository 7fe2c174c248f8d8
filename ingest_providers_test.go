package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProvidersByRule ingests answer files of providers read by rule
// (testdata/shapes: the Responses API alone and in Batch lines, Cohere v2,
// a provider that counts reasoning beside completion_tokens, Gemini's
// generateContent, an older llama.cpp) and asks what a user asks: each
// provider's word for a finish reason is gendex's (a cut answer is
// truncated, whatever it was called), the reasoning tokens are summed
// where known, and a line whose counts add up to no total it states is
// unknown, said once, naming its line.
func TestProvidersByRule(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	for _, ds := range []string{"responses", "cohere", "reasoning_total", "gemini", "llamacpp_old"} {
		b, err := os.ReadFile(filepath.Join("testdata", "shapes", ds, "raw_responses.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(p.dir, "answers", ds)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := p.mustRun("ingest", "answers")
	if !strings.Contains(out, "reasoning_total/raw_responses.jsonl:3: prompt 10 + completion 30 (+ reasoning 5) is not the total 99") ||
		strings.Contains(out, "raw_responses.jsonl:4: prompt") {
		t.Errorf("ingest does not say once, at line 3, that reasoning_total's counts add up to no total:\n%s", out)
	}
	cells := []struct{ question, dataset, col, want string }{
		{"tokens", "responses", "truncated", "2"},          // incomplete, max_output_tokens: alone and in a Batch line
		{"tokens", "responses", "reasoning_tokens", "244"}, // 180 + 64 + 0 + 0 + 0
		{"tokens", "responses", "completion_tokens", "298"},
		{"finish", "responses", "stop", "2"},
		{"finish", "responses", "length", "2"},
		{"finish", "responses", "content_filter", "1"},
		{"tokens", "cohere", "truncated", "1"}, // MAX_TOKENS
		{"tokens", "cohere", "completion_tokens", "28"},
		{"tokens", "cohere", "reasoning_tokens", ""},              // unknown: no line says
		{"finish", "cohere", "stop", "2"},                         // COMPLETE
		{"tokens", "reasoning_total", "completion_tokens", "382"}, // 254 + 120 + 8
		{"tokens", "reasoning_total", "reasoning_tokens", "304"},
		{"tokens", "reasoning_total", "unknown_tokens", "2"},
		{"tokens", "gemini", "completion_tokens", "110"}, // 54 + 16 + 40
		{"tokens", "gemini", "truncated", "1"},           // MAX_TOKENS
		{"tokens", "llamacpp_old", "truncated", "1"},     // stopped_limit
		{"finish", "llamacpp_old", "stop", "2"},          // stopped_eos, stopped_word
	}
	for _, c := range cells {
		if got := queryCell(t, p, c.col, c.question, c.dataset); got != c.want {
			t.Errorf("query %s %s: %s = %q; want %q", c.question, c.dataset, c.col, got, c.want)
		}
	}
}
