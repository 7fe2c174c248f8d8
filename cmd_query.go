package main

import (
	"context"
	"fmt"
	"io"

	"gendex/query"
	"gendex/query/format"
	"gendex/query/live"
)

// runQuery asks one question about the index and writes the answer to
// stdout: a table on a terminal, TSV with a header when piped.
func runQuery(ctx context.Context, c *call, args []string) error {
	if helpAsked(args) { // the question's flags are query.Parse's own
		c.printHelp(c.env.Stdout, nil)
		fmt.Fprintln(c.env.Stdout, "\nQuestions:")
		writeQuestions(c.env.Stdout, "  ")
		return errHelp
	}
	q, err := query.Parse(args)
	if err != nil {
		return err
	}
	q.Resolve(c.env.StdoutTTY)
	out := format.NewWriter(c.env.Stdout, format.Options{Format: q.Format, NoHeader: q.NoHeader})
	asker := live.NewAsker(c.db)
	defer asker.Close()
	if err := asker.Ask(ctx, q, c.env.Now(), out); err != nil {
		return err
	}
	return out.Close()
}

// writeQuestions writes one line per question, its usage and what it
// answers, each line starting with indent.
func writeQuestions(w io.Writer, indent string) {
	for _, q := range query.Questions {
		fmt.Fprintf(w, "%s%-56s %s\n", indent, q.Usage, q.Help)
	}
}
