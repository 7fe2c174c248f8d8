package chart

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func sample() *Chart {
	t0 := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	c := &Chart{Title: "tokens/s", Unit: "tokens/s", End: t0.Add(time.Hour)}
	tot, a := Series{Name: "TOTAL"}, Series{Name: "a"}
	for i := range 60 {
		c.Times = append(c.Times, t0.Add(time.Duration(i)*time.Minute))
		v := 100 + 50*math.Sin(float64(i)/6)
		if i >= 20 && i < 35 {
			v = 0
		}
		a.Values = append(a.Values, v)
		tot.Values = append(tot.Values, v*1.5)
	}
	a.Values[50] = math.NaN()
	c.Series = []Series{tot, a}
	c.Marks = []Mark{{t0.Add(20 * time.Minute), "down", "http://s down", ""}, {t0.Add(35 * time.Minute), "up", "http://s up", "back after 15m"}}
	return c
}

// TestTextFits: every size gives at most height lines of at most width
// columns, the time axis with the marks' glyphs, and the legend.
func TestTextFits(t *testing.T) {
	c := sample()
	for _, size := range [][2]int{{80, 24}, {200, 50}, {40, 10}, {120, 12}, {10, 3}} {
		out := c.Text(size[0], size[1])
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		w, h := max(size[0], MinWidth), max(size[1], MinHeight)
		if len(lines) > h {
			t.Errorf("%v: %d lines", size, len(lines))
		}
		for _, l := range lines {
			if n := utf8.RuneCountInString(l); n > w {
				t.Errorf("%v: line of %d columns: %q", size, n, l)
			}
		}
		legend := "events: 11:20:00 ↓ http://s down"
		if w < 80 {
			legend = "events: (+2 more: gendex query events)"
		}
		if !strings.Contains(out, "↓") || !strings.Contains(out, "↑") || !strings.Contains(out, legend) {
			t.Errorf("%v: no marks:\n%s", size, out)
		}
	}
}

func TestShortAndNice(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 12.5: "12.5", 830: "830", 1234: "1.2k", 45000: "45k", 3.4e6: "3.4M", 2: "2"} {
		if got := Short(v); got != want {
			t.Errorf("Short(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.1: 2, 2.2: 2.5, 240: 250, 3000: 5000, 7000: 10000} {
		if got := niceCeil(v); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestLayout(t *testing.T) {
	for _, c := range []struct{ n, rows, shown, more int }{{1, 20, 1, 0}, {3, 20, 3, 0}, {10, 20, 5, 5}, {2, 5, 1, 1}} {
		shown, lines, more := layout(c.n, c.rows)
		sum := 0
		for _, l := range lines {
			sum += l
		}
		if more > 0 {
			sum++
		}
		if shown != c.shown || more != c.more || sum > max(c.rows, 3) || len(lines) != shown {
			t.Errorf("layout(%d, %d) = %d %v %d", c.n, c.rows, shown, lines, more)
		}
	}
}

// TestSVGIsSelfContained: the SVG is one svg element with no script and
// no reference outside itself, a polyline per panel and a line per mark.
func TestSVGIsSelfContained(t *testing.T) {
	s := string(sample().SVG(1000))
	for _, bad := range []string{"<script", "href", "url(", "@import", "http://s\"", "<image"} {
		if strings.Contains(s, bad) {
			t.Errorf("SVG has %q", bad)
		}
	}
	if !strings.HasPrefix(s, "<svg ") || !strings.HasSuffix(s, "</svg>\n") || strings.Count(s, "<polyline") != 3 || strings.Count(s, "stroke-dasharray") != 2 {
		t.Errorf("SVG:\n%s", s)
	}
}

// TestMeanWeighsSteps: the mean a panel's header gives is the rate over
// the steps' time: a current step half a second old weighs half a second,
// not as much as a whole minute.
func TestMeanWeighsSteps(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	c := &Chart{Times: []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Minute)}, End: t0.Add(2*time.Minute + 500*time.Millisecond)}
	mean, hi, ok := c.stats(Series{Values: []float64{10, 20, 0}})
	if want := (10*60 + 20*60 + 0*0.5) / 120.5; !ok || math.Abs(mean-want) > 1e-9 || hi != 20 {
		t.Errorf("stats = %v %v %v, want mean %v, max 20", mean, hi, ok, want)
	}
	if mean, _, _ := c.stats(Series{Values: []float64{math.NaN(), 20, 0}}); math.Abs(mean-20*60/60.5) > 1e-9 {
		t.Errorf("an unknown step weighs nothing: mean %v", mean)
	}
}

// TestLimitMarks: a limit change is marked ↕ on the time axis and in the
// legend, never over a down in its column nor before it in a legend too
// small for all; the SVG draws it lighter than
// a down (its own colour and dashes); and an SVG with more marks than its
// legend holds lists the downs, ups and restarts first, in time order,
// and counts the limit changes it leaves out.
func TestLimitMarks(t *testing.T) {
	c := sample()
	t0 := c.Times[0]
	// In time order, as the events come: a limit change before the down,
	// one with it, one after the up.
	c.Marks = []Mark{{t0.Add(10 * time.Minute), "limit", "http://s limit 64→128", "64 -> 128: room"}, c.Marks[0],
		{t0.Add(20 * time.Minute), "limit", "http://s limit 128→512", "128 -> 512: room"}, c.Marks[1],
		{t0.Add(45 * time.Minute), "limit", "http://s limit 512→390", "512 -> 390: preemptions (37 in 5s)"}}
	out := c.Text(200, 30)
	axis := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "└") {
			axis = l
		}
	}
	if strings.Count(axis, "↕") != 2 || strings.Count(axis, "↓") != 1 || !strings.Contains(out, "11:45:00 ↕ http://s limit 512→390") {
		t.Errorf("two ↕ on the axis (the third under the down), and their legend entries:\n%s", out)
	}
	// A legend too narrow for all: the down first, not the limit change
	// before it.
	if out := c.Text(80, 12); !strings.Contains(out, "\nevents: 11:20:00 ↓ http://s down  (+4 more: gendex query events)\n") {
		t.Errorf("a narrow legend does not list the down and up before the limit changes:\n%s", out)
	}
	s := string(c.SVG(1000))
	if !strings.Contains(s, `stroke="#6a3fb5" stroke-dasharray="2 4"><title>http://s limit 512→390 512 -&gt; 390: preemptions (37 in 5s)</title>`) ||
		!strings.Contains(s, `>11:45:00 ↕ http://s limit 512→390 (512 -&gt; 390: preemptions (37 in 5s))</text>`) {
		t.Errorf("SVG limit mark:\n%s", s)
	}

	var many []Mark
	for i := range 50 {
		many = append(many, Mark{t0.Add(time.Duration(i) * time.Minute), "limit", "l" + strconv.Itoa(i), ""})
	}
	many[40] = Mark{t0.Add(40 * time.Minute), "down", "d", ""}
	c.Marks = many
	s = string(c.SVG(1000))
	entries := regexp.MustCompile(`<text x="70" y="[0-9.]+" fill="[^"]*">([^<]*)</text>`).FindAllStringSubmatch(s, -1)
	if len(entries) != svgLegendLines || entries[len(entries)-1][1] != "(+21 more: gendex query events)" {
		t.Fatalf("legend of 50 marks: %d lines, the last %q", len(entries), entries[len(entries)-1])
	}
	if got := entries[len(entries)-2][1]; got != "11:40:00 ↓ d" {
		t.Errorf("the down, the latest mark kept, is not the legend's last entry: %q", got)
	}
}
