package servermetrics

import (
	"math"
	"strings"
	"testing"

	"gendex/ingest/gen/servermetrics/metricstest"
)

// TestParseProm: names with colons, labels in any order, escapes, NaN,
// exponents, histograms and comments, as SGLang writes them.
func TestParseProm(t *testing.T) {
	samples, bad := parseProm([]byte(metricstest.SGLang), nil)
	if bad != 0 {
		t.Errorf("%d lines did not parse", bad)
	}
	if got, want := len(samples), strings.Count(metricstest.SGLang, "\nsglang:")+0; got != want {
		t.Errorf("%d samples, want %d", got, want)
	}
	first := samples[0]
	if first.name != "sglang:num_running_reqs" || first.value != 60 {
		t.Errorf("first sample %+v", first)
	}
	if m, _ := first.label("model_name"); m != "org/\"Kimi\"\\K2.5\nbeta" {
		t.Errorf("model_name unescaped to %q", m)
	}
	if r, _ := first.label("tp_rank"); r != "0" {
		t.Errorf("tp_rank %q", r)
	}
	for _, tc := range []struct {
		line  string
		ok    bool
		name  string
		value float64
	}{
		{`up 1`, true, "up", 1},
		{`a:b_c{} -Inf`, true, "a:b_c", math.Inf(-1)},
		{`x{l="v",} 2 1700000000000`, true, "x", 2}, // trailing comma, timestamp
		{`x { l = "a b" , m="}" } 3.5e2`, true, "x", 350},
		{`x{l="unclosed} 1`, false, "", 0},
		{`x{l=v} 1`, false, "", 0},
		{`x 1 2 3`, false, "", 0},
		{`x one`, false, "", 0},
		{`9x 1`, false, "", 0},
		{`x`, false, "", 0},
	} {
		s, ok := parsePromLine(tc.line)
		if ok != tc.ok || ok && (s.name != tc.name || s.value != tc.value) {
			t.Errorf("%q: %+v %v, want %q %v %v", tc.line, s, ok, tc.name, tc.value, tc.ok)
		}
	}
	if s, _ := parsePromLine(`x { l = "a b" , m="}" } 1`); len(s.labels) != 2 || s.labels[1].value != "}" {
		t.Errorf("labels %+v", s.labels)
	}
	if _, bad := parseProm([]byte("ok 1\nnot a sample\n# comment\n\n\r\nok 2"), nil); bad != 1 {
		t.Errorf("bad = %d, want 1", bad)
	}
}
