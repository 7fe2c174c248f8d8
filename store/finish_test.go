package store

import (
	"maps"
	"testing"
)

// TestFinishReason: each provider's word is mapped onto gendex's reason,
// whatever its case; a word with no mapping is kept as written.
func TestFinishReason(t *testing.T) {
	for written, want := range map[string]string{
		"stop": FinishStop, "end_turn": FinishStop, "STOP": FinishStop, "COMPLETE": FinishStop, "eos_token": FinishStop,
		"FINISH": FinishStop, "completed": FinishStop,
		"length": FinishLength, "max_tokens": FinishLength, "MAX_TOKENS": FinishLength, "limit": FinishLength,
		"max_output_tokens": FinishLength, "LENGTH": FinishLength,
		"tool_use": FinishToolCalls, "TOOL_CALL": FinishToolCalls,
		"SAFETY": FinishFilter, "content_filtered": FinishFilter,
		"abort": "abort", "pause_turn": "pause_turn", "OTHER": "OTHER", "": "",
	} {
		if got := FinishReason(written); got != want {
			t.Errorf("FinishReason(%q) = %q; want %q", written, got, want)
		}
		if Truncated(written) != (want == FinishLength) {
			t.Errorf("Truncated(%q) = %v", written, !(want == FinishLength))
		}
	}
}

// TestFinishesOfAnOldIndex: an index written before the mapping keeps the
// providers' words; its counts are read as gendex's reasons, each counted
// once.
func TestFinishesOfAnOldIndex(t *testing.T) {
	s := Stats{Finish: map[string]uint64{"stop": 3, "end_turn": 2, "max_tokens": 4, "length": 1, "MAX_TOKENS": 5, "pause_turn": 1}}
	want := map[string]uint64{"stop": 5, "length": 10, "pause_turn": 1}
	if got := s.Finishes(); !maps.Equal(got, want) {
		t.Errorf("Finishes() = %v; want %v", got, want)
	}
	if n := s.TruncatedCount(); n != 10 {
		t.Errorf("TruncatedCount() = %d; want 10", n)
	}
	var none Stats
	if none.Finishes() != nil || none.TruncatedCount() != 0 {
		t.Error("no finish reasons: want none")
	}
}
