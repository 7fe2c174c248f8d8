// Package shell is gendex's interactive shell: every query question, plus
// watch, format, help and quit, over the same query package as `gendex
// query`, so the same question gets the same answer. On a terminal it edits
// lines with liner (history, tab completion, Ctrl-C cancels the running
// command, Ctrl-D leaves); otherwise it reads commands line by line, with no
// prompt, and prints plain output, so it scripts like any Unix tool.
//
// shell is the only package that imports liner.
package shell

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/peterh/liner"

	"gendex/query"
	"gendex/query/format"
	"gendex/query/live"
	"gendex/query/plot"
	"gendex/store"
	"gendex/store/terminal"
)

// Shell is one session.
type Shell struct {
	Ask query.Asker
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Interactive: stdin and stdout are a terminal; use liner.
	Interactive bool
	// HistoryPath is where command history is kept (mode 0600); "" keeps none.
	HistoryPath string
	Now         func() time.Time
	// Width returns the terminal's width now, which tables and watch fit
	// (nil or 0: no limit).
	Width func() int
	// DBPath is the index file: watch waits for it to exist.
	DBPath string

	format    query.Format
	datasets  []string
	fetchedAt time.Time
	mu        sync.Mutex
}

const prompt = "gendex> "

// Run reads and runs commands until quit, end of input, or ctx is done.
// Off a terminal it returns an error if any command failed, which wraps
// the kinds (store.ErrNoIndex, store.ErrBadIndex, store.ErrNotFound) of
// the failures that had one, so that gendex exits as the query command
// would.
func (s *Shell) Run(ctx context.Context) error {
	if s.Now == nil {
		s.Now = time.Now
	}
	s.format = query.TSV
	if s.Interactive {
		s.format = query.Table
		return s.interactive(ctx)
	}
	sc := bufio.NewScanner(s.In)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	failed := &commandsFailed{}
	for sc.Scan() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		quit, err := s.exec(ctx, sc.Text())
		if err != nil {
			fmt.Fprintf(s.Err, "gendex: %s\n", strings.TrimPrefix(err.Error(), "usage: "))
			failed.add(err)
		}
		if quit {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading commands: %w", err)
	}
	if failed.n > 0 {
		return failed
	}
	return nil
}

// commandsFailed is the error of a run off a terminal in which n commands
// failed; it wraps each kind of failure among them once.
type commandsFailed struct {
	n     int
	kinds []error
}

func (e *commandsFailed) add(err error) {
	e.n++
	for _, k := range []error{store.ErrNoIndex, store.ErrBadIndex, store.ErrNotFound} {
		if errors.Is(err, k) && !slices.Contains(e.kinds, k) {
			e.kinds = append(e.kinds, k)
		}
	}
}

func (e *commandsFailed) Error() string   { return fmt.Sprintf("%d commands failed", e.n) }
func (e *commandsFailed) Unwrap() []error { return e.kinds }

func (s *Shell) interactive(ctx context.Context) (err error) {
	line := liner.NewLiner()
	defer line.Close() // restores the terminal on every way out, panics included
	line.SetCtrlCAborts(true)
	line.SetTabCompletionStyle(liner.TabPrints)
	line.SetWordCompleter(s.complete)
	s.loadHistory(line)
	fmt.Fprintln(s.Out, "gendex shell: type help for the commands, Ctrl-D to leave.")

	// Ctrl-C while a command runs cancels that command, not the shell.
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)

	for {
		text, err := line.Prompt(prompt)
		switch {
		case errors.Is(err, liner.ErrPromptAborted):
			continue // Ctrl-C at the prompt: a fresh line
		case errors.Is(err, io.EOF):
			fmt.Fprintln(s.Out)
			return nil
		case err != nil:
			return err
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if len(text) < 4000 { // longer lines would break the history file
			line.AppendHistory(text)
			s.saveHistory(line)
		}
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			select {
			case <-interrupts:
				cancel()
			case <-done:
			}
		}()
		quit, err := s.exec(cctx, text)
		close(done)
		canceled := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case canceled:
			fmt.Fprintln(s.Out, "^C")
		case err != nil:
			io.WriteString(s.Err, errorText(err, s.width()))
		}
		if quit || ctx.Err() != nil {
			return ctx.Err()
		}
		// Drain a Ctrl-C that raced the end of the command.
		select {
		case <-interrupts:
		default:
		}
	}
}

// errorText is how the interactive shell says a command's error: on a
// line of its own after "gendex: ", broken between words within width
// columns (less one, so the terminal never wraps it itself), a quoted
// command kept whole (terminal.WrapLines); width <= 0 leaves it one line.
func errorText(err error, width int) string {
	return terminal.WrapLines("gendex: "+strings.TrimPrefix(err.Error(), "usage: ")+"\n", width-1)
}

// exec runs one command line and reports whether the shell should end.
func (s *Shell) exec(ctx context.Context, text string) (quit bool, err error) {
	words, err := split(text)
	if err != nil || len(words) == 0 || strings.HasPrefix(words[0], "#") {
		return false, err
	}
	if words[0] == "query" && len(words) > 1 { // a line copied from `gendex query ...`
		words = words[1:]
	}
	switch words[0] {
	case "quit", "exit", `\q`:
		return true, nil
	case "help", "?":
		s.help()
		return false, nil
	case "format":
		if len(words) != 2 {
			return false, fmt.Errorf("usage: format table|tsv|csv|json (now %s)", s.format)
		}
		f, err := query.ParseFormat(words[1])
		if err != nil || f == query.Auto {
			return false, fmt.Errorf("usage: format table|tsv|csv|json")
		}
		s.format = f
		return false, nil
	case "watch":
		return false, s.watch(ctx, words[1:])
	case "plot": // as gendex plot (package plot)
		a, err := plot.Parse(words[1:])
		if err != nil {
			return false, err
		}
		return false, a.Run(ctx, s.Ask, s.Now(), plot.Options{Out: s.Out})
	}
	return false, s.ask(ctx, words, s.Out)
}

// ask answers one question in the shell's format (a --format flag wins).
func (s *Shell) ask(ctx context.Context, words []string, w io.Writer) error {
	q, err := query.Parse(words)
	if err != nil {
		return err
	}
	if q.Format == query.Auto {
		q.Format = s.format
	}
	q.Resolve(s.Interactive)
	out := format.NewWriter(w, format.Options{Format: q.Format, NoHeader: q.NoHeader, Width: s.width(), Layout: q.Question, Notes: s.Err})
	if err := s.Ask.Ask(ctx, q, s.Now(), out); err != nil {
		return err
	}
	return out.Close()
}

// width returns the terminal's width now; 0 when unknown.
func (s *Shell) width() int {
	if s.Width == nil {
		return 0
	}
	return s.Width()
}

// help lists the questions and the shell's commands, within the terminal's
// width (80 columns when it is unknown).
func (s *Shell) help() {
	width := s.width()
	if width <= 0 {
		width = 80
	}
	var b strings.Builder
	say := func(first, indent, text string) {
		for _, l := range terminal.Wrap(text, width, first, indent) {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("Questions (the same as 'gendex query'):\n")
	for _, q := range query.Questions {
		say("  ", "      ", q.Usage)
		say("      ", "      ", q.Help)
	}
	say("", "  ", "Flags, anywhere on the line: --format table|tsv|csv|json; --no-header (TSV, CSV).")
	b.WriteString("Shell commands:\n")
	for _, c := range [][2]string{
		{"watch [SECONDS] [QUESTION...]", "refresh a question every SECONDS (default 2) until Ctrl-C; with no question: " +
			"each dataset's progress, answers and tokens per second over the last 30 s and 5 m of the run, and its ETA; " +
			"then each server gen read in the last 30 s (up, running, queued, KV use, tokens/s)"},
		{plot.Usage, "as gendex plot: " + plot.Summary},
		{"format table|tsv|csv|json", "the output format from now on"},
		{"help", "this text"},
		{"quit", "leave (or Ctrl-D)"},
	} {
		say("  ", "      ", c[0])
		say("      ", "      ", c[1])
	}
	io.WriteString(s.Out, b.String())
}

// split cuts a command line into words; '...' and "..." group words.
func split(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// watch refreshes a question (or the dashboard) until ctx is canceled.
func (s *Shell) watch(ctx context.Context, args []string) error {
	every := 2 * time.Second
	if len(args) > 0 {
		if n, err := strconv.ParseFloat(args[0], 64); err == nil {
			if n < 0.2 {
				return fmt.Errorf("watch: refresh every %gs is too often (0.2 s at least)", n)
			}
			every = time.Duration(n * float64(time.Second))
			args = args[1:]
		}
	}
	if len(args) > 0 {
		if _, err := query.Parse(args); err != nil {
			return err
		}
	}
	resized := make(chan os.Signal, 1)
	terminal.NotifyResize(resized)
	defer signal.Stop(resized)
	title := strings.Join(args, " ")
	if title == "" {
		title = "progress"
	}
	for {
		var b strings.Builder
		var err error
		switch {
		case s.DBPath != "" && !exists(s.DBPath):
			// Started before gen or ingest: wait for the index.
			for _, l := range terminal.Wrap(fmt.Sprintf("waiting for the index %s: gen or ingest makes it", s.DBPath), s.width(), "", "") {
				b.WriteString(l + "\n")
			}
		case len(args) == 0:
			err = s.dashboard(ctx, &b)
		default:
			// A writer that is not answering is shown, and watch goes on.
			err = live.ShowNotAnswering(&b, s.ask(ctx, args, &b))
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Interactive {
			fmt.Fprint(s.Out, "\x1b[H\x1b[2J") // home and clear
		}
		head := fmt.Sprintf("every %s: %s    %s    (Ctrl-C to stop)", every, title, s.Now().Format(time.TimeOnly))
		if w := s.width(); w > 0 && terminal.Width(head) > w {
			head = terminal.Cut(fmt.Sprintf("every %s: %s", every, title), max(w-len("  00:00:00  (Ctrl-C to stop)"), 8), false) +
				"  " + s.Now().Format(time.TimeOnly) + "  (Ctrl-C to stop)"
		}
		fmt.Fprintf(s.Out, "%s\n\n%s\n", head, b.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		case <-resized: // redraw at the new width at once
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// complete completes the word under the cursor: a command, a flag, a flag's
// value, or a dataset name.
func (s *Shell) complete(line string, pos int) (head string, completions []string, tail string) {
	rs := []rune(line)
	pos = min(pos, len(rs))
	start := pos
	for start > 0 && rs[start-1] != ' ' {
		start--
	}
	head, word, tail := string(rs[:start]), string(rs[start:pos]), string(rs[pos:])
	before := strings.Fields(head)
	var candidates []string
	switch {
	case len(before) == 0:
		candidates = append(query.Names(), "watch", "plot", "format", "help", "quit")
	case before[len(before)-1] == "--stage" && before[0] == "missing":
		candidates = []string{"raw", "tokenized"}
	case before[len(before)-1] == "--stage":
		candidates = store.StageNames()
	case before[len(before)-1] == "--format" || before[0] == "format" && len(before) == 1:
		candidates = []string{"table", "tsv", "csv", "json"}
	case before[len(before)-1] == "--window" || before[len(before)-1] == "--since":
		candidates = []string{"30s", "5m", "1h"}
	case strings.HasPrefix(word, "-"):
		candidates = questionFlags(question(before))
	case before[0] == "watch" && len(before) == 1 || before[0] == "watch" && len(before) == 2 && isNumber(before[1]):
		candidates = append(query.Names(), s.names()...)
	default:
		candidates = s.names()
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, word) {
			completions = append(completions, c+" ")
		}
	}
	return head, completions, tail
}

// question returns the question a command line's words ask ("" for none):
// the first word, or the one after watch and its SECONDS.
func question(words []string) string {
	if len(words) > 0 && words[0] == "watch" {
		words = words[1:]
		if len(words) > 0 && isNumber(words[0]) {
			words = words[1:]
		}
	}
	if len(words) == 0 {
		return ""
	}
	return words[0]
}

// questionFlags returns the flags a question takes: every question
// --format and --no-header, and its own.
func questionFlags(q string) []string {
	flags := []string{"--format", "--no-header"}
	switch q {
	case "throughput":
		flags = append(flags, "--window")
	case "server":
		flags = append(flags, "--window", "--all-servers")
	case "missing":
		flags = append(flags, "--stage")
	case "show":
		flags = append(flags, "--stage", "--sample")
	case "events":
		flags = append(flags, "--since")
	case "series":
		flags = append(flags, "--step", "--since", "--servers")
	case "shards":
		flags = append(flags, "--quiet")
	case "":
		return nil // watch's own line, or nothing yet
	}
	return flags
}

func isNumber(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

// names returns the dataset names, asked for at most every 5 s.
func (s *Shell) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.fetchedAt) < 5*time.Second {
		return s.datasets
	}
	q, _ := query.Parse([]string{"datasets"})
	var c query.Collect
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.Ask.Ask(ctx, q, s.Now(), &c) == nil {
		s.datasets = s.datasets[:0]
		for _, row := range c.Result.Rows {
			if name, ok := row[0].(string); ok {
				s.datasets = append(s.datasets, name)
			}
		}
		s.fetchedAt = time.Now()
	}
	return s.datasets
}

func (s *Shell) loadHistory(line *liner.State) {
	if s.HistoryPath == "" {
		return
	}
	if f, err := os.Open(s.HistoryPath); err == nil {
		line.ReadHistory(f)
		f.Close()
	}
}

func (s *Shell) saveHistory(line *liner.State) {
	if s.HistoryPath == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(s.HistoryPath), 0o700); err != nil {
		return
	}
	tmp := s.HistoryPath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return
	}
	_, err = line.WriteHistory(f)
	if cerr := f.Close(); err == nil && cerr == nil {
		os.Rename(tmp, s.HistoryPath)
	}
}

// HistoryPath returns where the shell keeps its history:
// $XDG_STATE_HOME/gendex/history, or ~/.local/state/gendex/history.
func HistoryPath(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gendex", "history")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "gendex", "history")
	}
	return ""
}
