package main

import (
	"context"

	"gendex/shell"
)

// runShell asks questions typed on stdin, with line editing and history
// when stdin and stdout are terminals.
func runShell(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	rest, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("shell takes no arguments (commands come on its input)")
	}
	asker := newAsker(c.db)
	defer asker.Close()
	sh := &shell.Shell{
		Ask: asker, In: c.env.Stdin, Out: c.env.Stdout, Err: c.env.Stderr,
		Interactive: c.env.StdinTTY && c.env.StdoutTTY, Now: c.env.Now,
		HistoryPath: shell.HistoryPath(c.env.Getenv),
		Width:       func() int { return termWidth(c.env) }, DBPath: c.db,
	}
	return sh.Run(ctx)
}
