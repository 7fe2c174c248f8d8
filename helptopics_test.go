package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"gendex/query/format"
	"gendex/store/terminal"
)

// frontPageLines is how long README's front part (before the reference
// marker) may grow: a newcomer reads it in ten minutes; the details go in
// the reference, where 'gendex help TOPIC' finds them.
const frontPageLines = 160

// TestHelpTopicsFitEighty: every topic exists and renders, and every line
// of 'gendex help TOPIC' is within 80 columns, its tables and code blocks
// too. A topic that is also a command prints the command's help first,
// then its section.
func TestHelpTopicsFitEighty(t *testing.T) {
	t.Parallel()
	for _, topic := range helpTopics {
		out := mustGendex(t, testEnv(nil), "help", topic.Name).stdout
		lines, _ := readmeSection(topic.Heading)
		rendered := renderMarkdown(lines)
		if len(rendered) < 4 {
			t.Errorf("gendex help %s: %d lines:\n%s", topic.Name, len(rendered), out)
			continue
		}
		code := map[string]bool{}
		for _, l := range rendered {
			code[l.Text] = code[l.Text] || l.Verbatim
		}
		title := inline(strings.TrimLeft(topic.Heading, "# "))
		if cmd := lookup(topic.Name); cmd != nil {
			if !strings.HasPrefix(out, "usage: gendex "+topic.Name) || !strings.Contains(out, "\n\n"+title+"\n===") {
				t.Errorf("gendex help %s: not the command's help, then README's section %q:\n%s", topic.Name, title, out)
			}
		} else if !strings.HasPrefix(out, title+"\n===") {
			t.Errorf("gendex help %s: does not start with its title %q:\n%s", topic.Name, title, out)
		}
		for i, l := range strings.Split(out, "\n") {
			if w := terminal.Width(l); w > helpWidth {
				t.Errorf("gendex help %s, line %d: %d columns: %s", topic.Name, i+1, w, l)
			}
			if strings.Contains(l, "`") && !code[l] || strings.Contains(l, "**") {
				t.Errorf("gendex help %s, line %d: Markdown left: %s", topic.Name, i+1, l)
			}
		}
		// Code blocks are printed as they are: each is a line of README.
		section := "\n" + strings.Join(lines, "\n") + "\n"
		for _, l := range rendered {
			if l.Verbatim && !strings.Contains(section, "\n"+l.Text+"\n") {
				t.Errorf("gendex help %s: a code line not as README writes it: %q", topic.Name, l.Text)
			}
		}
	}
}

// TestHelpTopicsAreReadme: the reference's sections (every "## " heading
// after README's "# Reference") are the reference topics, in README's
// order; the front part holds the other topics' sections; and the topic
// list of 'gendex help' is the topics, in that order.
func TestHelpTopicsAreReadme(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != readme {
		t.Fatal("the embedded README is not README.md: rebuild")
	}
	front, ref, ok := strings.Cut(string(b), "\n"+referenceMarker+"\n")
	if !ok {
		t.Fatalf("README.md has no line %q", referenceMarker)
	}
	var headings []string
	for _, l := range strings.Split(ref, "\n") {
		if headingLevel(l) == 2 {
			headings = append(headings, l)
		}
	}
	var refTopics, want []string
	for _, topic := range helpTopics {
		if strings.Contains(front, "\n"+topic.Heading+"\n") {
			if len(refTopics) > 0 {
				t.Errorf("topic %s (in README's front part) listed after the reference's topics", topic.Name)
			}
			continue
		}
		refTopics = append(refTopics, topic.Heading)
	}
	if strings.Join(headings, "\n") != strings.Join(refTopics, "\n") {
		t.Errorf("README's reference sections are not the reference topics (helpTopics); sections:\n%s\n--- topics:\n%s",
			strings.Join(headings, "\n"), strings.Join(refTopics, "\n"))
	}
	for _, topic := range helpTopics {
		want = append(want, topic.Name)
		if !regexp.MustCompile(`^[a-z][a-z-]*$`).MatchString(topic.Name) {
			t.Errorf("topic name %q", topic.Name)
		}
	}
	out := mustGendex(t, testEnv(nil), "help").stdout
	_, list, ok := strings.Cut(out, "\nHelp topics (gendex help TOPIC")
	if !ok {
		t.Fatalf("gendex help lists no topics:\n%s", out)
	}
	var got []string
	for _, l := range strings.Split(list, "\n")[1:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		if f := strings.Fields(l); !strings.HasPrefix(l, "   ") {
			got = append(got, f[0])
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("gendex help lists the topics %q; want %q", got, want)
	}
	// README's paragraph under the marker names every reference topic.
	for _, topic := range helpTopics {
		if !strings.Contains(ref[:strings.Index(ref, "\n## ")], "`"+topic.Name+"`") {
			t.Errorf("README's %q paragraph does not name topic %s", referenceMarker, topic.Name)
		}
	}
}

// TestReadmeFrontPage: README's front part, up to the reference marker,
// stays a front page of at most frontPageLines lines, and leads with what
// gendex is, how to build it, the Quickstart and the SpecForge recipe.
func TestReadmeFrontPage(t *testing.T) {
	t.Parallel()
	front, _, ok := strings.Cut(readme, "\n"+referenceMarker+"\n")
	if !ok {
		t.Fatalf("README.md has no line %q", referenceMarker)
	}
	if n := strings.Count(front, "\n") + 1; n > frontPageLines {
		t.Errorf("README's front part is %d lines, over %d: move details to the reference (after %q)", n, frontPageLines, referenceMarker)
	}
	at := 0
	for _, want := range []string{
		"\n## Build or install\n", "    go build -o gendex .", "    go install gendex ",
		"\n## Quickstart", "    go test -race -timeout 8m ./...", "bash .ci/run",
		"\n## SpecForge: from a ShareGPT file to training data\n", "--max-new-tokens 8192",
	} {
		i := strings.Index(front[at:], want)
		if i < 0 {
			t.Fatalf("README's front part lacks %q after what comes before it", want)
		}
		at += i
	}
}

// TestRenderMarkdown: inline Markdown is removed, paragraphs and list
// items re-wrapped, code blocks kept, tables aligned.
func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"`--max-new-tokens` is **128** by *default*": "--max-new-tokens is 128 by default",
		"files `raw_responses*` and `errors*`":       "files raw_responses* and errors*",
		"[bbolt](https://github.com/etcd-io/bbolt)":  "bbolt (https://github.com/etcd-io/bbolt)",
		"[a.svg](a.svg) and ![chart](a.svg)":         "a.svg and chart (a.svg)",
		"- *The run* (a wrong key: 401/403)":         "- The run (a wrong key: 401/403)",
	} {
		if got := inline(in); got != want {
			t.Errorf("inline(%q) = %q, want %q", in, got, want)
		}
	}
	md := []string{
		"## Title `x`", "", "A paragraph", "over `two` lines.", "",
		"    code   as   is",
		"    more code", "",
		"- an item", "  continued", "  - nested", "",
		"  | a | b |", "  |---|---|", "  | `1` | 2 |",
	}
	var got []string
	for _, l := range renderMarkdown(md) {
		got = append(got, l.Text)
	}
	want := []string{
		"Title x", "=======", "", "A paragraph over two lines.", "",
		"    code   as   is", "    more code", "",
		"- an item continued", "  - nested", "",
		"  a  b", "  -  -", "  1  2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("renderMarkdown:\n%s\n--- want:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	long := strings.Repeat("word ", 40) + strings.Repeat("x", 120)
	for _, l := range renderMarkdown([]string{long}) {
		if terminal.Width(l.Text) > helpWidth {
			t.Errorf("a wrapped line of %d columns: %q", terminal.Width(l.Text), l.Text)
		}
	}
}

// TestHelpUnknownTopic: a name that is neither a command nor a topic is a
// usage error naming both lists.
func TestHelpUnknownTopic(t *testing.T) {
	t.Parallel()
	r := gendex(t, testEnv(nil), "help", "nosuch")
	if r.code != 2 || !strings.Contains(r.stderr, "topics: quickstart") || !strings.Contains(r.stderr, "commands: gen") {
		t.Errorf("gendex help nosuch: %s", r)
	}
}

// commandHelp returns the output of 'gendex help NAME' without the README
// section a command that is also a topic prints after its help.
func commandHelp(t *testing.T, name, out string) string {
	t.Helper()
	topic := lookupTopic(name)
	if topic == nil {
		return out
	}
	var b strings.Builder
	if err := printTopic(&b, topic, helpWidth); err != nil {
		t.Fatal(err)
	}
	help, ok := strings.CutSuffix(out, "\n"+b.String())
	if !ok {
		t.Fatalf("gendex help %s does not end with README's section %q:\n%s", name, topic.Heading, out)
	}
	return help
}

// TestShortHeadersExplained: every short header of the tables `query`
// prints most (progress, tokens, throughput, server) is explained in
// `gendex help query`.
func TestShortHeadersExplained(t *testing.T) {
	t.Parallel()
	lines, ok := readmeSection("## query")
	if !ok {
		t.Fatal(`README.md has no "## query" section`)
	}
	text := strings.Join(lines, " ")
	for _, name := range []string{"progress", "tokens", "throughput", "server"} {
		for _, c := range format.Layouts[name].Cols {
			if c.Short != "" && !strings.Contains(text, "`"+c.Short+"`") {
				t.Errorf("help query does not explain %s's short header %q (%s)", name, c.Short, c.Name)
			}
		}
	}
}

// TestRenderTable: a table whose cells fit is aligned columns; one that
// does not has its widest column wrapped within its cell, the narrow ones
// kept whole; one whose columns cannot all keep their longest word is a
// list of "header: value" lines. Every line is within the width, and
// every word of every cell is there.
func TestRenderTable(t *testing.T) {
	t.Parallel()
	long := strings.TrimSpace(strings.Repeat("a long explanation ", 12))
	words := strings.Repeat("response.body.choices[0].finish_reason ", 3)
	for _, tc := range []struct {
		name  string
		md    []string
		width int
		want  []string // lines, in order (prefixes)
	}{
		{"fits", []string{"| key | value |", "|---|---|", "| `a|b` | 2 |"}, 80,
			[]string{"key  value", "---  -----", "a|b  2"}},
		{"wrapped", []string{"| reason | when |", "|---|---|", "| `length` | " + long + " |", "| `abort` | short |"}, 60,
			[]string{"reason  when", "------  ----", "length  a long explanation", "        ", "", "abort   short"}},
		{"list", []string{"| shape | id | counts |", "|---|---|---|", "| SGLang | `meta_info.id_or_custom_id` | " + words + " |", "| x | | y |"}, 60,
			[]string{"shape: SGLang", "  id: meta_info.id_or_custom_id", "  counts: response.body", "", "shape: x", "  counts: y"}},
	} {
		lines := renderTable(tc.md, 0, tc.width)
		at := 0
		for _, w := range tc.want {
			for at < len(lines) && !strings.HasPrefix(lines[at], w) {
				at++
			}
			if at == len(lines) {
				t.Errorf("%s: no line %q where expected:\n%s", tc.name, w, strings.Join(lines, "\n"))
				break
			}
			at++
		}
		var text []string
		for _, l := range lines {
			if terminal.Width(l) > tc.width {
				t.Errorf("%s: a line of %d columns over %d: %q", tc.name, terminal.Width(l), tc.width, l)
			}
			text = append(text, strings.Fields(l)...)
		}
		all := " " + strings.Join(text, " ") + " "
		for _, row := range tc.md[2:] {
			for _, c := range splitTableRow(row) {
				for _, w := range strings.Fields(c) {
					if !strings.Contains(all, " "+w+" ") && !strings.Contains(all, " "+w) {
						t.Errorf("%s: the word %q is lost:\n%s", tc.name, w, strings.Join(lines, "\n"))
					}
				}
			}
		}
	}
}
