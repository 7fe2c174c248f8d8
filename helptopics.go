package main

import (
	_ "embed"
	"fmt"
	"io"
	"regexp"
	"strings"

	"gendex/store/terminal"
)

// readme is README.md, the source of 'gendex help TOPIC'.
//
//go:embed README.md
var readme string

// referenceMarker is the line of README.md that starts its reference part:
// every "## " section after it is a help topic (TestHelpTopicsAreReadme),
// and the front part before it stays a front page (TestReadmeFrontPage).
const referenceMarker = "# Reference"

// A helpTopic is a section of README.md that 'gendex help NAME' prints.
type helpTopic struct {
	Name    string
	Heading string // the section's heading line, as README writes it
	Summary string // for the topic list of 'gendex help'
}

// helpTopics are README's sections that 'gendex help' prints: first the
// front part's, then every section of the reference, in README's order.
var helpTopics = []helpTopic{
	{"quickstart", "## Quickstart (a fresh machine with Go 1.26, no GPU)", "a dry run against the built-in simulator, then the real run"},
	{"specforge", "## SpecForge: from a ShareGPT file to training data", "the EAGLE-3 recipe: ShareGPT prompts to SpecForge's records"},
	{"answered", "## What counts as answered", "a dataset is a place: which answers count, and where"},
	// The reference, after referenceMarker.
	{"guarantees", "## Guarantees", "what survives a crash, a stalled reader or a bad server"},
	{"scale-out", "## Past one machine: more servers, or shards on a cluster scheduler", "more servers behind one gen, or shards on Slurm or Kubernetes"},
	{"gen", "## gen", "prompts, APIs, servers, sampling, failures, live view, --export"},
	{"tools", "## Tool conversations (agentic datasets)", "tool-calling sets: shapes, server flags, pairing, stops, records"},
	{"sim", "## sim", "the simulator of SGLang, vLLM and llama.cpp"},
	{"shell", "## shell", "the interactive shell and watch"},
	{"live", "## Live answers while a run writes", "the writer's socket, readers, and /metrics"},
	{"web", "## web: the run in a browser", "the run and every answer in a local page, live; ssh -L"},
	{"ingest", "## ingest", "indexing JSONL files, incrementally; bad input; --field, --explain"},
	{"export", "## export: training records", "conversations and ids records, exclusions"},
	{"check", "## check: the gate before training", "is each dataset fit to train on: the reasons"},
	{"query", "## query", "every question's columns and what the numbers mean"},
	{"plot", "## series and plot: the run over time", "query series and gendex plot"},
	{"drafter", "## Measuring a drafter", "accept length from answers and from the servers"},
	{"disk", "## The disk is the truth", "files gone, moved or copied; gendex relocate"},
	{"formats", "## Formats it reads", "every response shape, ids, streams, --map"},
	{"internals", "## How it works", "the packages and what each one does"},
	{"numbers", "## Measured numbers", "ingest, questions, gen, export and soak, measured"},
}

// lookupTopic returns the help topic called name, or nil.
func lookupTopic(name string) *helpTopic {
	for i := range helpTopics {
		if helpTopics[i].Name == name {
			return &helpTopics[i]
		}
	}
	return nil
}

// topicNames returns the topics' names, comma-separated.
func topicNames() string {
	names := make([]string, len(helpTopics))
	for i, t := range helpTopics {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// writeTopicList writes the topic list of 'gendex help', within helpWidth.
func writeTopicList(w io.Writer) {
	fmt.Fprint(w, "\nHelp topics (gendex help TOPIC; README.md, section by section):\n")
	for _, t := range helpTopics {
		wrapTo(w, t.Summary, fmt.Sprintf("  %-12s", t.Name), strings.Repeat(" ", 14))
	}
}

// readmeSection returns the lines of README's section that starts with
// the line heading, up to the next heading of its level or above (a line
// that starts with fewer or as many '#'), its last blank lines cut; ok is
// false when README has no such heading.
func readmeSection(heading string) (lines []string, ok bool) {
	all := strings.Split(readme, "\n")
	level := headingLevel(heading)
	for i, l := range all {
		if l != heading {
			continue
		}
		end := len(all)
		for j := i + 1; j < len(all); j++ {
			if n := headingLevel(all[j]); n > 0 && n <= level {
				end = j
				break
			}
		}
		lines = all[i:end]
		for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
			lines = lines[:len(lines)-1]
		}
		return lines, true
	}
	return nil, false
}

// headingLevel returns the level of a Markdown heading line ("## x": 2),
// or 0 when line is no heading.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

// printTopic writes topic t, README's section rendered for a terminal
// width columns wide (see renderMarkdownAt).
func printTopic(w io.Writer, t *helpTopic, width int) error {
	lines, ok := readmeSection(t.Heading)
	if !ok {
		return fmt.Errorf("help %s: README.md has no section %q", t.Name, t.Heading)
	}
	for _, l := range renderMarkdownAt(lines, width) {
		fmt.Fprintln(w, l.Text)
	}
	return nil
}

// A renderedLine is a line of a topic as the terminal shows it; Verbatim
// lines (code blocks) are printed as README has them.
type renderedLine struct {
	Text     string
	Verbatim bool
}

// renderMarkdown renders README's Markdown for a terminal of helpWidth
// columns (see renderMarkdownAt).
func renderMarkdown(lines []string) []renderedLine {
	return renderMarkdownAt(lines, helpWidth)
}

// renderMarkdownAt renders README's Markdown for a terminal width columns
// wide: headings underlined, paragraphs and list items re-wrapped within
// width (at most helpWidth, for reading) with emphasis, backticks and
// link syntax removed; indented code blocks as they are; tables within
// width, their inline markup removed (see renderTable).
func renderMarkdownAt(lines []string, width int) []renderedLine {
	if width <= 0 {
		width = helpWidth
	}
	prose := min(width, helpWidth)
	var out []renderedLine
	emit := func(text string, verbatim bool) { out = append(out, renderedLine{text, verbatim}) }
	blank := func() {
		if len(out) > 0 && out[len(out)-1].Text != "" {
			emit("", false)
		}
	}
	wrap := func(text, first, indent string) {
		for _, l := range wrapWordsWithin(inline(text), prose, first, indent) {
			emit(l, false)
		}
	}
	listIndent := -1 // the indent of the list item being read, -1 outside one
	var para []string
	paraFirst, paraIndent := "", ""
	flush := func() {
		if len(para) > 0 {
			wrap(strings.Join(para, " "), paraFirst, paraIndent)
			para = nil
		}
	}
	var table []string // the lines of the table being read
	tableIndent := 0
	flushTable := func() {
		if len(table) > 0 {
			for _, l := range renderTable(table, tableIndent, width) {
				emit(l, false)
			}
			table = nil
		}
	}
	prevBlank := true
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if !strings.HasPrefix(trimmed, "|") {
			flushTable()
		}
		switch {
		case trimmed == "":
			flush()
			blank()
			prevBlank = true
			continue
		case headingLevel(l) > 0:
			flush()
			blank()
			n := headingLevel(l)
			text := inline(strings.TrimSpace(l[n:]))
			emit(text, false)
			rule := "-"
			if n <= 2 {
				rule = "="
			}
			emit(strings.Repeat(rule, min(terminal.Width(text), prose)), false)
			emit("", false)
			listIndent = -1
		case strings.HasPrefix(trimmed, "|"):
			flush()
			if len(table) == 0 {
				tableIndent = indent
			}
			table = append(table, trimmed)
		case indent >= 4 && (prevBlank || (len(out) > 0 && out[len(out)-1].Verbatim && len(para) == 0)) && !isListItem(trimmed) && (listIndent < 0 || indent >= listIndent+6):
			// An indented code block (inside a list item: indented past
			// the item's text by four).
			flush()
			emit(strings.TrimRight(l, " "), true)
		case isListItem(trimmed):
			flush()
			marker, rest, _ := strings.Cut(trimmed, " ")
			listIndent = indent
			paraFirst = strings.Repeat(" ", indent) + marker + " "
			paraIndent = strings.Repeat(" ", len(paraFirst))
			para = []string{rest}
		default:
			if len(para) == 0 {
				if listIndent >= 0 && indent > listIndent {
					paraFirst = strings.Repeat(" ", listIndent+2)
				} else {
					paraFirst, listIndent = "", -1
				}
				paraIndent = paraFirst
			}
			para = append(para, trimmed)
		}
		prevBlank = false
	}
	flushTable()
	flush()
	for len(out) > 0 && out[len(out)-1].Text == "" {
		out = out[:len(out)-1]
	}
	return out
}

// isListItem reports whether a trimmed line starts a list item ("- x").
func isListItem(trimmed string) bool {
	return strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* ")
}

// isTableRule reports whether a table line is its header's rule
// ("|---|---|").
func isTableRule(trimmed string) bool {
	return strings.Trim(trimmed, "|-: ") == ""
}

var (
	imageRE  = regexp.MustCompile(`!\[([^\]]*)\]\(([^)]*)\)`)
	linkRE   = regexp.MustCompile(`\[([^\]]*)\]\(([^)]*)\)`)
	strongRE = regexp.MustCompile(`\*\*`)
	// An emphasis: a '*' after a space, a bracket or the start, its text,
	// then a '*' not followed by a letter.
	emRE = regexp.MustCompile(`(^|[\s(\[])\*([^\s*][^*]*?)\*($|[^\w*])`)
)

// inline removes Markdown's inline syntax from text: backticks (what they
// quote stays as it is), emphasis, and links (their text, then the
// address in brackets when it is not the text).
func inline(text string) string {
	parts := strings.Split(text, "`")
	for i := range parts {
		if i%2 == 1 {
			continue // code: as written
		}
		p := imageRE.ReplaceAllString(parts[i], "$1 ($2)")
		p = linkRE.ReplaceAllStringFunc(p, func(m string) string {
			s := linkRE.FindStringSubmatch(m)
			if s[1] == s[2] {
				return s[1]
			}
			return s[1] + " (" + s[2] + ")"
		})
		p = strongRE.ReplaceAllString(p, "")
		p = emRE.ReplaceAllString(p, "$1$2$3")
		parts[i] = p
	}
	return strings.Join(parts, "")
}

// wrapWordsWithin wraps text within width as terminal.Wrap does, and cuts
// a word wider than a line (a long path or flag list) where the line ends.
func wrapWordsWithin(text string, width int, first, indent string) []string {
	room := width - max(terminal.Width(indent), terminal.Width(first))
	var words []string
	for _, w := range strings.Fields(text) {
		for terminal.Width(w) > room && room > 10 {
			cut := 0
			for i := range w {
				if terminal.Width(w[:i]) > room {
					break
				}
				cut = i
			}
			words = append(words, w[:cut])
			w = w[cut:]
		}
		words = append(words, w)
	}
	return terminal.Wrap(strings.Join(words, " "), width, first, indent)
}
