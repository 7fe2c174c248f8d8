package gen

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

func mustMix(t *testing.T, args ...string) Mix {
	t.Helper()
	m, err := ParseMix(args, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMixDrawsArePinned pins the hash and the draw: a change to either
// re-draws every record of every dataset made so far, which a resume
// would then mix with the old draws.
func TestMixDrawsArePinned(t *testing.T) {
	pick, place := mixUnit("ds", "p1", 0, 0, "temperature")
	// As python3 computes it: hashlib.sha256(b'ds\x00p1\x000\x000\x00temperature\x00'),
	// its first and second 8 bytes big-endian, >>11, / 2**53.
	if got := fmt.Sprintf("%.12f %.12f", pick, place); got != "0.215415769829 0.898709230997" {
		t.Errorf("mixUnit(ds, p1, 0, 0, temperature) = %s", got)
	}
	m := mustMix(t, "temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15", "enable_thinking=true:0.75,false:0.25")
	var got []string
	for _, id := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		got = append(got, fmt.Sprint(m.draw("ds", id, 0, 7)))
	}
	if want := "[{enable_thinking true true} {temperature 1.0 1}] [{enable_thinking true true} {temperature 1.0 1}] " +
		"[{enable_thinking true true} {temperature 1.0 1}] [{enable_thinking true true} {temperature 0 0}] " +
		"[{enable_thinking true true} {temperature 1.0 1}] [{enable_thinking true true} {temperature u(0.2,1.0) 0.5326311010419451}]"; strings.Join(got, " ") != want {
		t.Errorf("draws:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// TestMixDrawIsTheRecords: the draw depends on the dataset, the id, the
// sample and the seed, and on nothing else (not the order of the calls).
func TestMixDrawIsTheRecords(t *testing.T) {
	m := mustMix(t, "temperature=0.1:0.5,u(0.5,0.9):0.5")
	a := fmt.Sprint(m.draw("ds", "x", 0, 0))
	for range 3 {
		if b := fmt.Sprint(m.draw("ds", "x", 0, 0)); b != a {
			t.Fatalf("drew %s, then %s", a, b)
		}
	}
	differ := 0
	for i := range 50 {
		id := fmt.Sprint("id", i)
		base := fmt.Sprint(m.draw("ds", id, 0, 0))
		for _, o := range []string{fmt.Sprint(m.draw("other", id, 0, 0)), fmt.Sprint(m.draw("ds", id, 1, 0)), fmt.Sprint(m.draw("ds", id, 0, 1))} {
			if o != base {
				differ++
			}
		}
	}
	if differ < 90 { // the same only when both draw 0.1: a quarter of the time (expect 112)
		t.Errorf("only %d of 150 draws changed with the dataset, sample or seed", differ)
	}
}

// TestMixDrawsTheSpecsShares draws 20,000 records and finds each part's
// share within 4.5 standard deviations of its weight, and a uniform
// part's values within its bounds.
func TestMixDrawsTheSpecsShares(t *testing.T) {
	m := mustMix(t, "temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15", "reasoning_effort=low:0.3,high:0.7")
	const n = 20000
	count := map[string]int{}
	for i := range n {
		for _, k := range m.draw("ds", fmt.Sprint(i), 0, 0) {
			count[k.key+"="+k.label]++
			if k.label == "u(0.2,1.0)" {
				if v := k.value.(float64); v < 0.2 || v >= 1.0 {
					t.Fatalf("u(0.2,1.0) drew %v", v)
				}
			}
		}
	}
	for _, k := range m {
		for _, p := range k.parts {
			got := count[k.Key+"="+p.label]
			if z := shareZ(got, n, p.weight); z > 4.5 {
				t.Errorf("%s=%s: %d of %d (weight %v): z %.1f", k.Key, p.label, got, n, p.weight, z)
			}
		}
	}
}

func shareZ(got, n int, w float64) float64 {
	sd := math.Sqrt(float64(n) * w * (1 - w))
	return math.Abs(float64(got)-float64(n)*w) / sd
}

func TestParseMixRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"temperature=0:0.5,1:0.4"}, "sum to 0.9"},
		{[]string{"temp=0:1"}, `unknown key "temp" (known: enable_thinking, frequency_penalty`},
		{[]string{"temperature"}, "want KEY=VALUE:WEIGHT"},
		{[]string{"temperature=0.5"}, "want VALUE:WEIGHT"},
		{[]string{"temperature=u(1,0.5):1"}, "LO < HI"},
		{[]string{"temperature=-1:1"}, "temperature must be >= 0"},
		{[]string{"top_p=u(0.5,1.5):1"}, "top_p must be in (0, 1]"},
		{[]string{"top_k=u(1,5):1"}, "top_k takes integers"},
		{[]string{"enable_thinking=yes:1"}, "takes true or false"},
		{[]string{"temperature=1:0.5,1:0.5"}, "1 is given twice"},
		{[]string{"temperature=1:1", "temperature=0:1"}, "--mix temperature is given twice"},
		{[]string{"top_p=1:1"}, "--top-p and --mix top_p both set top_p"},
	} {
		_, err := ParseMix(c.args, func(f string) bool { return f == "top-p" })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseMix(%q) = %v, want an error with %q", c.args, err, c.want)
		}
	}
	m := mustMix(t, "reasoning_effort=low:0.3,high:0.7", "enable_thinking=true:0.75,false:0.25", "top_k=20:0.5,-1:0.5")
	if got := fmt.Sprint(m.specs()); got != "map[enable_thinking:true:0.75,false:0.25 reasoning_effort:low:0.3,high:0.7 top_k:20:0.5,-1:0.5]" {
		t.Errorf("specs %s", got)
	}
}

// TestMixResumeComparesSpecs: a resume compares each key's spec, never
// what a record drew.
func TestMixResumeComparesSpecs(t *testing.T) {
	run := []byte(`{"sampling":{},"mix":{"temperature":"0:0.5,1:0.5"}}`)
	answer := []byte(`{"sampling":{},"mix":{"temperature":"0:0.5,1:0.5"},"drawn":{"temperature":"1"}}`)
	if d := provenanceDiff(answer, run); d != "" {
		t.Errorf("a draw differs from the run: %s", d)
	}
	other := []byte(`{"sampling":{},"mix":{"temperature":"0:0.2,1:0.8"}}`)
	if d := provenanceDiff(answer, other); d != `mix.temperature: "0:0.5,1:0.5" before, "0:0.2,1:0.8" now` {
		t.Errorf("another spec: %q", d)
	}
	if d := provenanceDiff(answer, []byte(`{"sampling":{}}`)); d != `mix.temperature: "0:0.5,1:0.5" before, unset (the server's default) now` {
		t.Errorf("no spec now: %q", d)
	}
}
