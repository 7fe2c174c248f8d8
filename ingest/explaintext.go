package ingest

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"gendex/store/terminal"
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
	if _, err := strconv.ParseInt(v, 10, 64); err != nil && (f.Field != "finish_reason" || strconv.Quote(v) != `"`+v+`"`) {
		v = strconv.Quote(v)
	}
	v = terminal.Cut(v, 24, false)
	where := ""
	switch {
	case len(f.From) > 0:
		where = "from " + oneEach(f.From)
	case len(f.By) > 0:
		where = "decided by " + strings.Join(f.By, ", ")
	default:
		where = f.Why
	}
	first := name + v + strings.Repeat(" ", max(25-terminal.Width(v), 1))
	switch {
	case where == "":
		fmt.Fprintln(w, strings.TrimRight(first, " "))
	case terminal.Width(first)+terminal.Width(where) > explainWidth: // on a line of its own
		fmt.Fprintln(w, strings.TrimRight(first, " "))
		wrapWords(w, where, indent, indent)
	default:
		fmt.Fprintln(w, first+where)
	}
}

// oneEach joins paths, and says paths that differ in one list index
// alone ("a.0.text", "a.1.text", "a.7.text") once: "a.N.text (each N)".
func oneEach(paths []string) string {
	if len(paths) < 2 {
		return strings.Join(paths, ", ")
	}
	first := strings.Split(paths[0], ".")
	at := -1
	for _, p := range paths[1:] {
		keys := strings.Split(p, ".")
		if len(keys) != len(first) {
			return strings.Join(paths, ", ")
		}
		for i := range keys {
			if keys[i] == first[i] {
				continue
			}
			if _, err := strconv.Atoi(keys[i]); err != nil || at >= 0 && at != i {
				return strings.Join(paths, ", ")
			}
			at = i
		}
	}
	first[at] = "N"
	return strings.Join(first, ".") + " (each N)"
}

// wrapWords writes text from first on, its words wrapped at
// explainWidth columns, each next line starting with indent; a word wider
// than a line is broken.
func wrapWords(w io.Writer, text, first, indent string) {
	line := first
	fresh := true // nothing on the line but its prefix
	for _, word := range strings.Fields(text) {
		for {
			room := explainWidth - terminal.Width(line)
			if !fresh {
				room-- // the space before the word
			}
			if terminal.Width(word) <= room {
				break
			}
			if fresh { // a word too wide for a line: break it
				head := widthPrefix(word, max(room, 1))
				fmt.Fprintln(w, line+head)
				word = word[len(head):]
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

// widthPrefix is the longest start of s (one rune at least) that fits n
// columns.
func widthPrefix(s string, n int) string {
	end := 0
	for i, r := range s {
		if i > 0 && terminal.Width(s[:i+len(string(r))]) > n {
			break
		}
		end = i + len(string(r))
	}
	return s[:end]
}
