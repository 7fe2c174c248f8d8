package servermetrics

import (
	"bytes"
	"strconv"
	"strings"
)

// The Prometheus text format as a /metrics answer holds it, parsed into
// samples: only the families a caller keeps, a line that does not parse
// counted and skipped.

// promSample is one sample line of the Prometheus text format.
type promSample struct {
	name   string
	labels []promLabel
	value  float64
}

type promLabel struct{ name, value string }

func (s *promSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l.name == name {
			return l.value, true
		}
	}
	return "", false
}

// parseProm reads the Prometheus text exposition format (version 0.0.4,
// and the OpenMetrics lines SGLang's Python client writes): every sample
// line's name, labels and value. Comments (# HELP, # TYPE, # EOF) and
// blank lines are skipped; histogram and summary samples (_bucket, _sum,
// _count) come back as samples of those names, for the caller to ignore.
// Label values are unescaped (\\, \" and \n). A line that does not parse
// is skipped and counted in bad. keep, when set, says which names to
// read: the lines of other names are skipped after their name.
func parseProm(text []byte, keep func(name string) bool) (samples []promSample, bad int) {
	for len(text) > 0 {
		var line []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if keep != nil {
			n := 0
			for n < len(line) && isNameByte(line[n], n == 0) {
				n++
			}
			if n > 0 && !keep(string(line[:n])) {
				continue
			}
		}
		s, ok := parsePromLine(string(line))
		if !ok {
			bad++
			continue
		}
		samples = append(samples, s)
	}
	return samples, bad
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// parsePromLine reads `name{label="value",...} value [timestamp]`.
func parsePromLine(line string) (promSample, bool) {
	var s promSample
	i := 0
	for i < len(line) && isNameByte(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return s, false
	}
	s.name, line = line[:i], line[i:]
	line = strings.TrimLeft(line, " \t")
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			j := 0
			for j < len(line) && isNameByte(line[j], j == 0) {
				j++
			}
			if j == 0 {
				return s, false
			}
			name := line[:j]
			line = strings.TrimLeft(line[j:], " \t")
			if !strings.HasPrefix(line, "=") {
				return s, false
			}
			line = strings.TrimLeft(line[1:], " \t")
			if !strings.HasPrefix(line, `"`) {
				return s, false
			}
			var val strings.Builder
			j = 1
			closed := false
			for j < len(line) {
				c := line[j]
				if c == '"' {
					closed = true
					j++
					break
				}
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					case '\\', '"':
						val.WriteByte(line[j])
					default: // not an escape the format defines: keep it as written
						val.WriteByte('\\')
						val.WriteByte(line[j])
					}
					j++
					continue
				}
				val.WriteByte(c)
				j++
			}
			if !closed {
				return s, false
			}
			s.labels = append(s.labels, promLabel{name, val.String()})
			line = strings.TrimLeft(line[j:], " \t")
			if strings.HasPrefix(line, ",") {
				line = line[1:]
			} else if !strings.HasPrefix(line, "}") {
				return s, false
			}
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || len(fields) > 2 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}
