package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"gendex/query"
	"gendex/query/format"
	"gendex/store/terminal"
)

// runQuery asks one question about the index and writes the answer to
// stdout: a table on a terminal, TSV with a header when piped.
func runQuery(ctx context.Context, c *call, args []string) error {
	if helpAsked(args) { // the question's flags are query.Parse's own
		c.printHelp(c.env.Stdout, questionFlags())
		fmt.Fprintln(c.env.Stdout, "\nQuestions:")
		writeQuestions(c.env.Stdout, "  ")
		fmt.Fprintln(c.env.Stdout)
		wrapTo(c.env.Stdout, exitStatuses, "", "")
		return errHelp
	}
	q, err := query.Parse(args)
	if err != nil {
		return err
	}
	q.Resolve(c.env.StdoutTTY)
	out := format.NewWriter(c.env.Stdout, format.Options{Format: q.Format, NoHeader: q.NoHeader,
		Width: termWidth(c.env), Layout: q.Question, Notes: messages(c.env)})
	asker := newAsker(c.db)
	defer asker.Close()
	if err := asker.Ask(ctx, q, c.env.Now(), out); err != nil {
		return err
	}
	return out.Close()
}

// writeQuestions writes each question's usage and, under it, what it
// answers, each line starting with indent, within helpWidth.
func writeQuestions(w io.Writer, indent string) {
	for _, q := range query.Questions {
		wrapTo(w, q.Usage, indent, indent+"    ")
		wrapTo(w, q.Help, indent+"    ", indent+"    ")
	}
}

// questionFlags declares, for help only, the flags query.Parse reads.
func questionFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.String("format", "", "table, tsv, csv or json (default: a table on a terminal, fitted to its width; TSV when piped)")
	fs.Bool("no-header", false, "TSV and CSV without the header line (missing: bare ids, one per line)")
	fs.String("window", "30s", "throughput and server: the window ending now")
	fs.String("stage", "", "missing: raw or tokenized (default raw); show: the stage to look in (default: every stage)")
	fs.String("since", "", "events and series: how far back, such as 10m or 24h (default: all)")
	fs.String("step", "", "series: the length of a row, such as 10s or 1m (default: chosen from the span)")
	fs.Bool("servers", false, "series: rows per server, from their /metrics samples")
	fs.String("kind", "", "events: only events of these kinds, comma-separated, such as limit or down,up (default: all)")
	fs.Duration("quiet", 5*time.Minute, "shards: a shard with no answer for longer than this is quiet")
	return fs
}

// termWidth returns the width a table on stdout fits: the terminal's,
// read now (so a resized window is followed), or else $COLUMNS; 0 (no
// limit) when neither says.
func termWidth(env *Env) int {
	if f, ok := env.Stdout.(*os.File); ok && env.StdoutTTY {
		if n, _ := terminal.Size(f.Fd()); n > 0 {
			return n
		}
	}
	if n, err := strconv.Atoi(env.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 0
}
