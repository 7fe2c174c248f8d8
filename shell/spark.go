package shell

import (
	"fmt"
	"math"
	"strings"

	"gendex/query"
)

// sparkMinutes is how many one-minute steps watch's sparkline draws: the
// last 30 minutes.
const sparkMinutes = 30

// sparkColumn is the sparkline's column in watch's dataset table.
const sparkColumn = "last 30m"

var sparkLevels = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vals one character each, scaled to their own maximum:
// a space for a step with nothing (0, or not a positive number), else one
// of eight blocks, ▁ for the least above 0 up to █ for the maximum. All
// zero is all spaces.
func sparkline(vals []float64) string {
	top := 0.0
	for _, v := range vals {
		if v > top {
			top = v
		}
	}
	var b strings.Builder
	for _, v := range vals {
		if !(v > 0) || !(top > 0) {
			b.WriteByte(' ')
			continue
		}
		// 1e-9: a value at a level's top (a quarter of the maximum) is that
		// level, not the next one by a rounding error.
		i := int(math.Ceil(v/top*float64(len(sparkLevels))-1e-9)) - 1
		b.WriteRune(sparkLevels[min(max(i, 0), len(sparkLevels)-1)])
	}
	return b.String()
}

// sparkCell is a sparkline as a table cell: the table trims the blanks at
// a cell's ends, so the empty minutes there are drawn with the braille
// blank (U+2800), which shows as a space and keeps the minutes in place.
func sparkCell(line string) string {
	core := strings.Trim(line, " ")
	if core == "" {
		return strings.Repeat("\u2800", len(line))
	}
	lead := strings.Index(line, core)
	trail := len(line) - lead - len(core)
	return strings.Repeat("\u2800", lead) + core + strings.Repeat("\u2800", trail)
}

// sparkStep is one minute's answers of a line.
type sparkStep struct {
	seconds, answers, tokens, unknown float64
}

// sparklines returns each dataset's sparkline (and TOTAL's, of the
// datasets named) of the last 30 minutes in one-minute steps, from the
// series question: tokens/s, or answers/s for a line with a minute whose
// answers all have an unknown token count. The minutes are whole minutes
// of the clock, the last one the current minute up to now (its rate over
// its seconds so far), so that the line moves a step each minute.
func sparklines(collect func(args ...string) (*query.Result, error), names []string, nowUnix int64) (map[string]string, string, error) {
	end := (nowUnix + 59) / 60 * 60
	from := end - 60*sparkMinutes
	args := append([]string{"series", "--step", "1m", "--since", fmt.Sprintf("%ds", nowUnix-from), "--"}, names...)
	r, err := collect(args...)
	if err != nil {
		return nil, "", err
	}
	steps := map[string][]sparkStep{}
	total := make([]sparkStep, sparkMinutes)
	for _, row := range r.Rows {
		name, _ := r.Get(row, "dataset").(string)
		k := len(steps[name])
		if k >= sparkMinutes {
			continue
		}
		var st sparkStep
		st.seconds, _ = query.AsFloat(r.Get(row, "seconds"))
		st.answers, _ = query.AsFloat(r.Get(row, "answers"))
		st.tokens, _ = query.AsFloat(r.Get(row, "completion_tokens"))
		st.unknown, _ = query.AsFloat(r.Get(row, "unknown_tokens"))
		steps[name] = append(steps[name], st)
		total[k].seconds = st.seconds
		total[k].answers += st.answers
		total[k].tokens += st.tokens
		total[k].unknown += st.unknown
	}
	lines := make(map[string]string, len(steps))
	for name, st := range steps {
		lines[name] = sparkOf(st)
	}
	return lines, sparkOf(total), nil
}

// sparkOf draws one line's steps, the last one now, padded with blanks
// before them to 30 minutes.
func sparkOf(steps []sparkStep) string {
	steps = steps[max(len(steps)-sparkMinutes, 0):]
	tokens := true
	for _, st := range steps {
		if st.answers > 0 && st.unknown >= st.answers {
			tokens = false
		}
	}
	vals := make([]float64, sparkMinutes)
	for k, st := range steps {
		v := st.answers
		if tokens {
			v = st.tokens
		}
		vals[sparkMinutes-len(steps)+k] = v / max(st.seconds, 1)
	}
	return sparkline(vals)
}
