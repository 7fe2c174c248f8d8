package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// runHelp prints gendex's usage, or with a COMMAND that command's help
// (what 'gendex COMMAND -h' prints), to stdout.
func runHelp(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 0:
		printUsage(c.env.Stdout)
		return nil
	case 1:
		cmd := lookup(pos[0])
		if cmd == nil {
			return usagef("help: unknown command %q (want one of %s)", pos[0], commandNames())
		}
		return cmd.Run(ctx, &call{cmd: cmd, env: c.env, db: c.db}, []string{"-h"})
	}
	return usagef("help: give at most one COMMAND")
}

// commandNames returns the commands' names, comma-separated, in table order.
func commandNames() string {
	names := make([]string, len(commands))
	for i, cmd := range commands {
		names[i] = cmd.Name
	}
	return strings.Join(names, ", ")
}

// writeCommandList writes the command list: each command's usage lines,
// then its summary indented by four more spaces, every line starting with
// indent. The help, the package doc comment and README show this list.
func writeCommandList(w io.Writer, indent string) {
	for _, cmd := range commands {
		for _, u := range cmd.Usage {
			fmt.Fprintf(w, "%sgendex %s\n", indent, u)
		}
		fmt.Fprintf(w, "%s    %s\n", indent, cmd.Summary)
	}
}

// dbNote says where the index is; every command's help ends with it.
const dbNote = "Every command takes --db FILE, before or after its name (default ./gendex.db, or $GENDEX_DB)."

// printUsage writes gendex's usage: the command list and the questions.
func printUsage(w io.Writer) {
	fmt.Fprint(w, "gendex: generate synthetic datasets with an LLM server and ask about them instantly.\n\n")
	fmt.Fprint(w, "Usage:\n  gendex [--db FILE] COMMAND [ARGS]\n\n")
	fmt.Fprint(w, "Commands:\n")
	writeCommandList(w, "  ")
	fmt.Fprint(w, "\nQuestions (gendex query QUESTION):\n")
	writeQuestions(w, "  ")
	fmt.Fprintf(w, "\n%s\n", dbNote)
	fmt.Fprint(w, `Output is a table on a terminal and TSV with a header when piped; --format table|tsv|csv|json.
gen and ingest --follow take --listen HOST:PORT to serve Prometheus /metrics (--listen-queries: the
answers too); beyond loopback they need $GENDEX_TOKEN, which clients send as Authorization: Bearer.
Exit status: 0 ok, 1 error (or input lines left out), 2 usage, 130 interrupted.
Run 'gendex help COMMAND' for a command's flags.
`)
}

// printHelp writes the command's help: its usage lines, its summary and,
// when fs is not nil, fs's flags.
func (c *call) printHelp(w io.Writer, fs *flag.FlagSet) {
	for i, u := range c.cmd.Usage {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		fmt.Fprintf(w, "%sgendex %s\n", prefix, u)
	}
	fmt.Fprintf(w, "\n%s\n", c.cmd.Summary)
	if fs != nil {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if flags.Len() > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
		}
	}
	fmt.Fprintf(w, "\n%s\n", dbNote)
}

// helpAsked reports whether args ask for help (-h, -help or --help before
// any "--"), for a command that parses its flags without a flag.FlagSet.
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}
