// Package chart draws a time chart: one or more series of values over
// shared time steps, each in its own panel under one time axis, with
// events marked on that axis. Text draws it for a terminal of a given
// size, with braille dots (2×4 per cell); SVG draws the same chart as a
// self-contained SVG file (no script, no font or anything else fetched).
// It knows nothing of gendex: the caller says what the values are.
package chart

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart is what to draw.
type Chart struct {
	// Title is the first line; Unit names the values ("tokens/s").
	Title, Unit string
	// Times are the steps' starts, in order; a step lasts until the next
	// one, the last until End.
	Times []time.Time
	End   time.Time
	// Series are drawn one panel each, top to bottom; the first is given
	// the most room (the total, when there is one).
	Series []Series
	// Marks are events, marked on the time axis (those outside
	// [Times[0], End] are left out).
	Marks []Mark
	// YMax, when above 0, is every panel's top (100 for a percentage);
	// else each panel's top is a round number above its largest value.
	YMax float64
	// Location is the time zone of the axis' labels (nil: UTC).
	Location *time.Location
}

// Series is one line: a value per step of the chart's Times; NaN is a
// value not known, left undrawn.
type Series struct {
	Name   string
	Values []float64
}

// Mark is one event.
type Mark struct {
	Time  time.Time
	Kind  string // "down", "up", "restarted" or "limit"; anything else is drawn as "*"
	Label string // what the legend says after the time and the glyph
	// Detail follows Label in the SVG's legend, in brackets (the
	// terminal's has no room for it).
	Detail string
}

// Glyph is how a mark of kind is drawn on the time axis.
func Glyph(kind string) rune {
	switch kind {
	case "down":
		return '↓'
	case "up":
		return '↑'
	case "restarted":
		return '↻'
	case "limit":
		return '↕'
	}
	return '*'
}

// rank orders the glyphs that share a column: the highest wins (a limit
// change, frequent, never hides a down, an up or a restart).
func rank(kind string) int {
	switch kind {
	case "down":
		return 4
	case "restarted":
		return 3
	case "up":
		return 2
	case "limit":
		return 1
	}
	return 0
}

func (c *Chart) loc() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// span is the chart's time range; it is never empty.
func (c *Chart) span() (from, to time.Time) {
	if len(c.Times) == 0 {
		return c.End.Add(-time.Second), c.End
	}
	from, to = c.Times[0], c.End
	if !to.After(from) {
		to = from.Add(time.Second)
	}
	return from, to
}

// mid returns the middle of step i, where its value is drawn.
func (c *Chart) mid(i int) time.Time {
	next := c.End
	if i+1 < len(c.Times) {
		next = c.Times[i+1]
	}
	return c.Times[i].Add(next.Sub(c.Times[i]) / 2)
}

// marks returns the marks within the chart's span.
func (c *Chart) marks() []Mark {
	from, to := c.span()
	var out []Mark
	for _, m := range c.Marks {
		if !m.Time.Before(from) && !m.Time.After(to) {
			out = append(out, m)
		}
	}
	return out
}

// top returns the top of s's axis: YMax, or a round number at or above
// its largest value (1 when it has none above 0).
func (c *Chart) top(s Series) float64 {
	if c.YMax > 0 {
		return c.YMax
	}
	hi := 0.0
	for _, v := range s.Values {
		if !math.IsNaN(v) && v > hi {
			hi = v
		}
	}
	return niceCeil(hi)
}

// stats returns the mean and the largest of s's known values; ok is false
// when none is known. The mean weighs each step by how long it lasts (a
// rate over a part of a step, such as the current one, counts for that
// part), so it is the rate over the chart's known steps.
func (c *Chart) stats(s Series) (mean, hi float64, ok bool) {
	var sum, weight, plain float64
	n := 0
	for i, v := range s.Values {
		if math.IsNaN(v) {
			continue
		}
		if n == 0 || v > hi {
			hi = v
		}
		n++
		plain += v
		w := 1.0
		if i < len(c.Times) {
			next := c.End
			if i+1 < len(c.Times) {
				next = c.Times[i+1]
			}
			w = max(next.Sub(c.Times[i]).Seconds(), 0)
		}
		sum += v * w
		weight += w
	}
	if n == 0 {
		return 0, 0, false
	}
	if weight == 0 { // every known step lasts no time
		return plain / float64(n), hi, true
	}
	return sum / weight, hi, true
}

// niceCeil returns the least of 1, 2, 2.5 and 5 times a power of ten at or
// above v (1 for v <= 0).
func niceCeil(v float64) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 2.5, 5, 10} {
		if f*e >= v*(1-1e-12) {
			return f * e
		}
	}
	return 10 * e
}

// Short writes a number in at most 6 characters or so: 0, 0.25, 12.5,
// 830, 1.2k, 45k, 3.4M.
func Short(v float64) string {
	a := math.Abs(v)
	var s string
	switch {
	case a == 0:
		return "0"
	case a >= 1e9:
		s = trim(strconv.FormatFloat(v/1e9, 'f', 1, 64)) + "G"
	case a >= 1e6:
		s = trim(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case a >= 1e4:
		s = strconv.FormatFloat(v/1e3, 'f', 0, 64) + "k"
	case a >= 1e3:
		s = trim(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = trim(strconv.FormatFloat(v, 'f', 1, 64))
	default:
		s = trim(strconv.FormatFloat(v, 'f', 2, 64))
	}
	return s
}

func trim(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// tickSteps are the time axis' tick intervals to pick from.
var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// tick is one labelled moment on the time axis.
type tick struct {
	at    time.Time
	label string
}

// ticks returns the ticks of the span [from, to]: at most n, at a round
// interval, labelled by the clock ("15:04", "15:04:05" under a minute;
// with the date, "01-02 15:04", when the span crosses a day).
func ticks(from, to time.Time, n int, loc *time.Location) []tick {
	n = max(n, 2)
	span := to.Sub(from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if int(span/s) < n {
			step = s
			break
		}
	}
	layout := "15:04"
	if step < time.Minute {
		layout = "15:04:05"
	}
	if f, t := from.In(loc), to.In(loc); f.YearDay() != t.YearDay() || f.Year() != t.Year() {
		layout = "01-02 " + layout
		if step >= 24*time.Hour {
			layout = "01-02"
		}
	}
	var out []tick
	for t := roundUp(from, step, loc); !t.After(to); t = next(t, step, loc) {
		out = append(out, tick{t, t.In(loc).Format(layout)})
	}
	return out
}

// roundUp returns the first multiple of step at or after t, by the clock
// of loc (days start at midnight there).
func roundUp(t time.Time, step time.Duration, loc *time.Location) time.Time {
	lt := t.In(loc)
	if step >= 24*time.Hour {
		d := time.Date(lt.Year(), lt.Month(), lt.Day(), 0, 0, 0, 0, loc)
		if d.Before(t) {
			d = d.AddDate(0, 0, 1)
		}
		return d
	}
	_, off := lt.Zone()
	shift := time.Duration(off) * time.Second
	r := t.Add(shift).Truncate(step).Add(-shift)
	if r.Before(t) {
		r = r.Add(step)
	}
	return r
}

func next(t time.Time, step time.Duration, loc *time.Location) time.Time {
	if step >= 24*time.Hour {
		return t.In(loc).AddDate(0, 0, int(step/(24*time.Hour)))
	}
	return t.Add(step)
}

// rangeText says the span as people read it: "2026-12-01 11:00–12:00 UTC".
func rangeText(from, to time.Time, loc *time.Location) string {
	f, t := from.In(loc), to.In(loc)
	layout := "15:04"
	if f.Second() != 0 || t.Second() != 0 {
		layout = "15:04:05"
	}
	zone, _ := t.Zone()
	if f.Year() == t.Year() && f.YearDay() == t.YearDay() {
		return fmt.Sprintf("%s %s–%s %s", f.Format("2006-01-02"), f.Format(layout), t.Format(layout), zone)
	}
	return fmt.Sprintf("%s %s – %s %s %s", f.Format("2006-01-02"), f.Format(layout), t.Format("2006-01-02"), t.Format(layout), zone)
}

// legend returns the marks' legend entries: "11:20:00 ↓ http://s down",
// with their details when detail is true.
func (c *Chart) legend(marks []Mark, detail bool) []string {
	from, to := c.span()
	layout := "15:04:05"
	if f, t := from.In(c.loc()), to.In(c.loc()); f.YearDay() != t.YearDay() || f.Year() != t.Year() {
		layout = "01-02 15:04:05"
	}
	out := make([]string, len(marks))
	for i, m := range marks {
		out[i] = fmt.Sprintf("%s %c %s", m.Time.In(c.loc()).Format(layout), Glyph(m.Kind), m.Label)
		if detail && m.Detail != "" {
			out[i] += " (" + m.Detail + ")"
		}
	}
	return out
}
