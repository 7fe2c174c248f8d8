package main

import (
	"errors"
	"flag"
	"io"

	"gendex/query"
)

// A call is one run of a command: what the dispatcher hands its Run.
type call struct {
	cmd *Command
	env *Env
	db  string // the index file (see dbPath); a command without an index ignores it
}

// flags returns an empty flag set for the command, writing nothing.
func (c *call) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(c.cmd.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses fs's flags given anywhere among the positional arguments,
// which it returns. On -h it prints the command's help with fs's flags to
// stdout and returns errHelp; a bad flag is a usage error.
func (c *call) parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := query.ParseFlags(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(c.env.Stdout, fs)
		return nil, errHelp
	case err != nil:
		return nil, usagef("%s: %v", fs.Name(), err)
	}
	return pos, nil
}
