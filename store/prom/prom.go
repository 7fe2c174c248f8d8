// Package prom writes the Prometheus text exposition format, version 0.0.4:
// the one path by which gendex, gen and the SGLang simulator write /metrics.
// It sits under store/, the bottom of the house, because query (gendex's own
// /metrics), ingest (gen's) and the simulator all write through it and
// ingest may not import query; like store, it imports nothing of gendex's.
//
// A Writer writes a family's HELP and TYPE lines once, then its samples:
//
//	p := prom.NewWriter(w)
//	p.Family("gendex_records", "Records indexed.", prom.Gauge)
//	p.Uint(12, "dataset", name, "stage", "raw")
//	if err := p.Err(); err != nil { ... }
//
// Label values are escaped as the format asks (backslash, double quote and
// newline; nothing else), so any string, a user's dataset name included, is
// a valid label value. Names are checked instead: a bad metric or label name,
// a family started twice, a sample before any family or an odd list of
// labels is a mistake in the caller's code, and the Writer panics.
package prom

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ContentType is the HTTP Content-Type of what a Writer writes.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Type is a metric family's type.
type Type string

const (
	// Counter is a value that only goes up (until the process restarts).
	// Its name ends in _total.
	Counter Type = "counter"
	// Gauge is a value that goes up and down.
	Gauge Type = "gauge"
)

// Writer writes metric families to an io.Writer. It is not safe for
// concurrent use.
type Writer struct {
	w      io.Writer
	buf    []byte
	family string          // the family samples belong to; "" before the first
	seen   map[string]bool // families written
	err    error
}

// NewWriter returns a Writer that writes to w, a line per Write call.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, seen: map[string]bool{}}
}

// Err returns the first error the underlying io.Writer returned; after it
// the Writer writes nothing more.
func (p *Writer) Err() error { return p.err }

// Family starts the family name: it writes the HELP line (help with
// backslash and newline escaped; none when help is empty) and the TYPE line.
// The samples written until the next Family belong to it. It panics if name
// is not a valid metric name, if a Counter's name does not end in _total, or
// if the family was started before.
func (p *Writer) Family(name, help string, typ Type) {
	if !validName(name, true) {
		panic(fmt.Sprintf("prom: invalid metric name %q", name))
	}
	switch typ {
	case Counter:
		if !strings.HasSuffix(name, "_total") {
			panic(fmt.Sprintf("prom: counter %q does not end in _total", name))
		}
	case Gauge:
	default:
		panic(fmt.Sprintf("prom: family %q has unknown type %q", name, typ))
	}
	if p.seen[name] {
		panic(fmt.Sprintf("prom: family %q written twice", name))
	}
	p.seen[name] = true
	p.family = name
	b := p.buf[:0]
	if help != "" {
		b = append(b, "# HELP "...)
		b = append(b, name...)
		b = append(b, ' ')
		b = appendEscaped(b, help, false)
		b = append(b, '\n')
	}
	b = append(b, "# TYPE "...)
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, typ...)
	b = append(b, '\n')
	p.write(b)
}

// Int writes a sample of the current family with the value v and the
// labels given as name, value pairs.
func (p *Writer) Int(v int64, labels ...string) {
	p.write(strconv.AppendInt(p.sample(labels), v, 10), '\n')
}

// Uint is Int for an unsigned value.
func (p *Writer) Uint(v uint64, labels ...string) {
	p.write(strconv.AppendUint(p.sample(labels), v, 10), '\n')
}

// Float is Int for a float value, written as Python's prometheus_client
// writes one (so as SGLang does): NaN, +Inf, -Inf; otherwise the shortest
// decimal that reads back as v, with ".0" on whole numbers, and an exponent
// below 1e-4 and from 1e16 on.
func (p *Writer) Float(v float64, labels ...string) {
	p.write(appendFloat(p.sample(labels), v), '\n')
}

// appendFloat appends v formatted as Writer.Float writes it.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	}
	if a := math.Abs(v); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.AppendFloat(b, v, 'e', -1, 64)
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	if bytes.IndexByte(b[n:], '.') < 0 {
		b = append(b, ".0"...)
	}
	return b
}

// sample returns p.buf holding the current family's name and the labels,
// ready for the value.
func (p *Writer) sample(labels []string) []byte {
	if p.family == "" {
		panic("prom: sample before any family")
	}
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("prom: %s: labels %q are not name, value pairs", p.family, labels))
	}
	b := append(p.buf[:0], p.family...)
	for i := 0; i < len(labels); i += 2 {
		name := labels[i]
		if !validName(name, false) || strings.HasPrefix(name, "__") {
			panic(fmt.Sprintf("prom: %s: invalid label name %q", p.family, name))
		}
		for j := 0; j < i; j += 2 {
			if labels[j] == name {
				panic(fmt.Sprintf("prom: %s: label %q given twice", p.family, name))
			}
		}
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, name...)
		b = append(b, '=', '"')
		b = appendEscaped(b, labels[i+1], true)
		b = append(b, '"')
	}
	if len(labels) > 0 {
		b = append(b, '}')
	}
	return append(b, ' ')
}

// write writes b and then the bytes more, unless an earlier write failed.
func (p *Writer) write(b []byte, more ...byte) {
	b = append(b, more...)
	p.buf = b
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

// appendEscaped appends s with backslash and newline escaped, and the
// double quote too when quote is set (label values; HELP text leaves it
// alone). Bytes that are not UTF-8 become U+FFFD, since the format is UTF-8.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for _, r := range s { // invalid bytes come as utf8.RuneError
		switch {
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return b
}

// validName reports whether s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)
// or, without colon, a valid label name ([a-zA-Z_][a-zA-Z0-9_]*).
func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' ||
			i > 0 && c >= '0' && c <= '9' || colon && c == ':'
		if !ok {
			return false
		}
	}
	return true
}
