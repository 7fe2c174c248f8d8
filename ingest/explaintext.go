package ingest

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// explainWidth is the width WriteExplained keeps to.
const explainWidth = 80

// WriteExplained writes Explain's reports for a person, within 80
// columns (but for a long path): a line's file:line, on a line of its
// own, and how it was read (or why it is skipped), then one row per field, its value and where from (or why
// unknown), then what ingest says of it.
func WriteExplained(w io.Writer, reps []LineReport) {
	for _, r := range reps {
		fmt.Fprintf(w, "%s:%d:\n", r.File, r.Line)
		if r.Skipped != "" {
			wrapWords(w, "skipped: "+r.Skipped, "  ", "    ")
		} else {
			how := "read as " + unquote(r.Shape)
			switch r.Shape {
			case "":
				how = "read as a line of " + r.Stage
			case forms[fMapped].name:
				how = "read with the file's map"
			}
			wrapWords(w, how+" (rule: "+r.Rule+")", "  ", "    ")
		}
		for _, f := range r.Fields {
			writeField(w, f)
		}
		if r.Partial {
			wrapWords(w, fmt.Sprintf("note: only the line's first %d values were tried for where each field is from", maxLeaves), "  ", "    ")
		}
		for _, n := range r.Notes {
			wrapWords(w, "note: "+n, "  ", "    ")
		}
	}
}

// writeField writes one field's row: its name, value and sources, or
// "unknown" (or "none") and why.
func writeField(w io.Writer, f FieldReport) {
	name := fmt.Sprintf("  %-18s ", f.Field)
	indent := strings.Repeat(" ", len(name))
	if !f.Known {
		word := "unknown"
		if f.Field == "error" || f.Field == "reasoning" {
			word = "none"
		}
		if strings.HasPrefix(f.Why, inTurns) {
			word = ""
		}
		why := strings.TrimPrefix(f.Why, "none: ")
		if why == "none" || why == "none in the line" {
			why = ""
		}
		switch {
		case word == "":
			word = why
		case why != "":
			word += ": " + why
		}
		wrapWords(w, word, name, indent)
		return
	}
	v := f.Value
	if _, err := strconv.ParseInt(v, 10, 64); err != nil && f.Field != "finish_reason" {
		v = strconv.Quote(v)
	}
	v = cut(v, 24)
	where := ""
	switch {
	case len(f.From) > 0:
		where = "from " + strings.Join(f.From, ", ")
	case len(f.By) > 0:
		where = "decided by " + strings.Join(f.By, ", ")
	default:
		where = f.Why
	}
	first := name + v + strings.Repeat(" ", max(25-utf8.RuneCountInString(v), 1))
	if where == "" {
		fmt.Fprintln(w, strings.TrimRight(first, " "))
		return
	}
	wrapWords(w, where, first, strings.Repeat(" ", len(first)))
}

// cut shortens s to n runes, its end an ellipsis when cut.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// wrapWords writes text from first on, its words wrapped at
// explainWidth, each next line starting with indent; a word longer than
// a line is broken.
func wrapWords(w io.Writer, text, first, indent string) {
	line := first
	fresh := true // nothing on the line but its prefix
	for _, word := range strings.Fields(text) {
		for !fresh && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > explainWidth ||
			fresh && utf8.RuneCountInString(line)+utf8.RuneCountInString(word) > explainWidth {
			if fresh { // one word too long for a line: break it
				r := []rune(word)
				k := max(explainWidth-utf8.RuneCountInString(line), 1)
				fmt.Fprintln(w, line+string(r[:k]))
				word = string(r[k:])
			} else {
				fmt.Fprintln(w, line)
			}
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	fmt.Fprintln(w, strings.TrimRight(line, " "))
}
