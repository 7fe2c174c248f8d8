package prom_test

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"gendex/store/prom"
	"gendex/store/prom/promtest"
)

// TestWriter: HELP and TYPE once per family, then its samples; label
// values escape backslash, double quote and newline and nothing else; HELP
// escapes backslash and newline; labels keep the caller's order.
func TestWriter(t *testing.T) {
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	p.Family("gendex_records", "Records \"indexed\", a\\b\nnext.", prom.Gauge)
	p.Uint(18446744073709551615, "dataset", `数据"集\`, "stage", "raw")
	p.Uint(0, "dataset", "tab\there\r", "stage", "new\nline")
	p.Family("gendex_answers_total", "Answers.", prom.Counter)
	p.Int(-3)
	p.Family("sglang:gen_throughput", "", prom.Gauge)
	p.Float(5, "model_name", "m")
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	want := `# HELP gendex_records Records "indexed", a\\b\nnext.
# TYPE gendex_records gauge
gendex_records{dataset="数据\"集\\",stage="raw"} 18446744073709551615
gendex_records{dataset="tab	here` + "\r" + `",stage="new\nline"} 0
# HELP gendex_answers_total Answers.
# TYPE gendex_answers_total counter
gendex_answers_total -3
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m"} 5.0
`
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestInvalidUTF8: the format is UTF-8, so a label value's stray bytes
// become U+FFFD rather than invalid text.
func TestInvalidUTF8(t *testing.T) {
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	p.Family("x", "bad \xff help", prom.Gauge)
	p.Int(1, "l", "a\xffb\xc3")
	if !utf8.Valid(b.Bytes()) || !strings.Contains(b.String(), `x{l="a`+"\uFFFD"+`b`+"\uFFFD"+`"} 1`) {
		t.Errorf("%q", b.String())
	}
}

func TestFloat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{0, "0.0"}, {5, "5.0"}, {-2, "-2.0"}, {0.5, "0.5"}, {1234567, "1234567.0"},
		{1e15, "1000000000000000.0"}, {1e16, "1e+16"}, {1.5e300, "1.5e+300"},
		{1e-4, "0.0001"}, {1.5e-5, "1.5e-05"}, {0.30000000000000004, "0.30000000000000004"},
		{math.Copysign(0, -1), "-0.0"},
		{math.NaN(), "NaN"}, {math.Inf(1), "+Inf"}, {math.Inf(-1), "-Inf"},
	} {
		var b bytes.Buffer
		p := prom.NewWriter(&b)
		p.Family("v", "", prom.Gauge)
		p.Float(c.v)
		if got := strings.TrimPrefix(b.String(), "# TYPE v gauge\nv "); got != c.want+"\n" {
			t.Errorf("Float(%v) wrote %q; want %q", c.v, got, c.want)
		}
	}
}

// TestMistakes: what only a mistake in the caller's code does panics.
func TestMistakes(t *testing.T) {
	for what, f := range map[string]func(p *prom.Writer){
		"empty name":          func(p *prom.Writer) { p.Family("", "h", prom.Gauge) },
		"name with a dash":    func(p *prom.Writer) { p.Family("a-b", "h", prom.Gauge) },
		"name with a digit":   func(p *prom.Writer) { p.Family("1a", "h", prom.Gauge) },
		"non-ASCII name":      func(p *prom.Writer) { p.Family("données", "h", prom.Gauge) },
		"counter sans _total": func(p *prom.Writer) { p.Family("answers", "h", prom.Counter) },
		"unknown type":        func(p *prom.Writer) { p.Family("a", "h", "histogram") },
		"family twice": func(p *prom.Writer) {
			p.Family("a", "h", prom.Gauge)
			p.Family("b", "h", prom.Gauge)
			p.Family("a", "h", prom.Gauge)
		},
		"sample before family": func(p *prom.Writer) { p.Int(1) },
		//lint:ignore SA5012 an odd label list is the mistake under test
		"odd labels":         func(p *prom.Writer) { p.Family("a", "h", prom.Gauge); p.Int(1, "dataset") },
		"label with a colon": func(p *prom.Writer) { p.Family("a", "h", prom.Gauge); p.Int(1, "a:b", "v") },
		"reserved label":     func(p *prom.Writer) { p.Family("a", "h", prom.Gauge); p.Int(1, "__name__", "v") },
		"label twice":        func(p *prom.Writer) { p.Family("a", "h", prom.Gauge); p.Int(1, "l", "v", "m", "w", "l", "x") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", what)
				}
			}()
			f(prom.NewWriter(&bytes.Buffer{}))
		}()
	}
}

type failing struct{ n int }

func (f *failing) Write(b []byte) (int, error) {
	if f.n++; f.n > 1 {
		return 0, errors.New("disk full")
	}
	return len(b), nil
}

// TestErr: the first write error is kept and nothing more is written.
func TestErr(t *testing.T) {
	f := &failing{}
	p := prom.NewWriter(f)
	p.Family("a", "h", prom.Gauge)
	p.Int(1)
	p.Int(2)
	if err := p.Err(); err == nil || err.Error() != "disk full" || f.n != 2 {
		t.Errorf("Err() = %v after %d writes", err, f.n)
	}
}

// TestPromtool: promtool reads back what the Writer writes, whatever the
// label values and help.
func TestPromtool(t *testing.T) {
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	p.Family("gendex_records", "Records \"indexed\", a\\b\nnext.", prom.Gauge)
	for _, v := range []string{`数据"集\`, "", `\`, `"`, "\n", `\n`, "tab\there", "cr\r", "a\xffb", "\x00\x01\x7f", "emoji 🙂", `}{,="`} {
		p.Uint(1, "dataset", v, "stage", "raw")
	}
	p.Family("gendex_answers_total", "Answers.", prom.Counter)
	p.Int(3, "server", `http://REDACTED@gpu-1:30000/数据"集\`)
	p.Family("gendex_value", "Values of every kind.", prom.Gauge)
	for i, v := range []float64{0, 0.5, 1e16, 1.5e-5, math.NaN(), math.Inf(1), math.Inf(-1)} {
		p.Float(v, "i", strconv.Itoa(i))
	}
	p.Family("gendex_empty", "A family with no samples.", prom.Gauge)
	promtest.Check(t, b.Bytes())
}

// FuzzLabelValue: any label value reads back as written, by the format's
// unescaping (the text between the quotes, with \\, \" and \n undone).
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{`数据"集\`, "", `\n`, "a\nb", `\\"`, "\xff\xff", "\xe9\x9b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var b bytes.Buffer
		p := prom.NewWriter(&b)
		p.Family("m", "", prom.Gauge)
		p.Int(1, "l", v)
		line := strings.TrimPrefix(b.String(), "# TYPE m gauge\n")
		quoted, ok := strings.CutPrefix(line, `m{l="`)
		if !ok || !strings.HasSuffix(quoted, "\"} 1\n") {
			t.Fatalf("line %q", line)
		}
		got, rest, err := unquote(quoted)
		if err != nil || rest != "} 1\n" {
			t.Fatalf("line %q: %v, rest %q", line, err, rest)
		}
		if want := string([]rune(v)); got != want { // each stray byte a U+FFFD
			t.Errorf("label value %q read back as %q", want, got)
		}
	})
}

// unquote reads a label value as the format defines it, up to its closing
// quote, and returns it with what follows the quote.
func unquote(s string) (string, string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\n':
			return "", "", errors.New("raw newline")
		case '\\':
			if i++; i == len(s) {
				return "", "", errors.New("trailing backslash")
			}
			switch s[i] {
			case '\\':
				b.WriteByte('\\')
			case '"':
				b.WriteByte('"')
			case 'n':
				b.WriteByte('\n')
			default:
				return "", "", errors.New("invalid escape \\" + string(s[i]))
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("no closing quote")
}
