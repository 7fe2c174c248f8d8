// Command gendex runs synthetic-data generation against SGLang (and
// OpenAI-compatible servers), indexes every record of every stage into a
// bbolt file, and answers progress, token, missing-record and throughput
// questions instantly, while generation is still running.
//
// Usage:
//
//	gendex [--db FILE] COMMAND [ARGS]
//
// Commands:
//
//	gendex gen --server URL... [--export conversations|ids] [FLAGS] ROOT|DIR...
//	    answer every prompt exactly once with an SGLang or OpenAI-style server
//	gendex sim [--listen HOST:PORT] [FLAGS]
//	    a simulator of SGLang (or vLLM, llama.cpp), for dry runs and tests
//	gendex ingest [--follow] [--dataset NAME --stage STAGE] [--id PATH] PATH...
//	    index JSONL files: a root of dataset folders, one folder, or one file
//	gendex export [--format conversations|ids] [--out DIR] [FLAGS] ROOT|DIR...
//	    write a training record, or an exclusion and why, for every answer
//	gendex check [--max-length N] [--ids REASON] [--format table|json] ROOT|DIR...
//	    is each dataset fit to train on: every reason not, and its fix
//	gendex drop DATASET|FOLDER...
//	    make the index forget datasets, to start over (no file is touched)
//	gendex relocate OLD_FOLDER NEW_FOLDER
//	    tell the index that its files moved (or were copied) to NEW_FOLDER
//	gendex query QUESTION [ARGS] [--format table|tsv|csv|json] [--no-header]
//	    answer a question from the index, instantly, even while gen writes it
//	gendex plot [tokens|answers|queue|kv|accept] [FLAGS] [DATASET...|SERVER...]
//	    draw tokens/s (answers/s, queue, KV use, accept) over the run, or an SVG
//	gendex shell
//	    ask the same questions interactively (type help there); watch a run
//	gendex web [--listen HOST:PORT]
//	    the run and every answer in a local browser page, live, read-only
//	gendex help [COMMAND|TOPIC]
//	    this text, a command's flags, or a topic (a section of README)
//
// The index is ./gendex.db, or $GENDEX_DB, or --db FILE (before or after
// the command's name). 'gendex help COMMAND' shows a command's flags,
// 'gendex help TOPIC' a section of README.md. Exit status: 0 ok, 1 error
// (or input lines left out), 2 usage, 3 not in the index (an unknown
// dataset, id or server), 4 no index (missing or unreadable), 5 refused
// (gen sent nothing: change the command), 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/ingest/gen"
	"gendex/query"
	"gendex/query/live"
	"gendex/query/plot"
	"gendex/store"
)

// A Command is one gendex command, as the table lists it.
type Command struct {
	Name string
	// Usage holds the command's usage lines, without the leading "gendex ";
	// each starts with Name.
	Usage []string
	// Summary is one line saying what the command does, for the command list.
	Summary string
	// Run runs the command with the arguments after its name, --db taken
	// out. It parses them before it does anything else, so that -h (which
	// 'gendex help NAME' passes) prints the command's help and returns
	// errHelp without side effects.
	Run func(ctx context.Context, c *call, args []string) error
}

// commands is every command, in help order. Help, usage errors, the
// package doc comment and README's command list are made from it (the
// last two are checked against it by TestCommandListInDocs).
var commands []*Command

func init() { // not a plain initializer: help reads the table
	commands = []*Command{{
		Name:    "gen",
		Usage:   []string{"gen --server URL... [--export conversations|ids] [FLAGS] ROOT|DIR..."},
		Summary: "answer every prompt exactly once with an SGLang or OpenAI-style server",
		Run:     runGen,
	}, {
		Name:    "sim",
		Usage:   []string{"sim [--listen HOST:PORT] [FLAGS]"},
		Summary: "a simulator of SGLang (or vLLM, llama.cpp), for dry runs and tests",
		Run:     runSim,
	}, {
		Name:    "ingest",
		Usage:   []string{"ingest [--follow] [--dataset NAME --stage STAGE] [--id PATH] PATH..."},
		Summary: "index JSONL files: a root of dataset folders, one folder, or one file",
		Run:     runIngest,
	}, {
		Name:    "export",
		Usage:   []string{"export [--format conversations|ids] [--out DIR] [FLAGS] ROOT|DIR..."},
		Summary: "write a training record, or an exclusion and why, for every answer",
		Run:     runExport,
	}, {
		Name:    "check",
		Usage:   []string{"check [--max-length N] [--ids REASON] [--format table|json] ROOT|DIR..."},
		Summary: "is each dataset fit to train on: every reason not, and its fix",
		Run:     runCheck,
	}, {
		Name:    "drop",
		Usage:   []string{"drop DATASET|FOLDER..."},
		Summary: "make the index forget datasets, to start over (no file is touched)",
		Run:     runDrop,
	}, {
		Name:    "relocate",
		Usage:   []string{"relocate OLD_FOLDER NEW_FOLDER"},
		Summary: "tell the index that its files moved (or were copied) to NEW_FOLDER",
		Run:     runRelocate,
	}, {
		Name:    "query",
		Usage:   []string{"query QUESTION [ARGS] [--format table|tsv|csv|json] [--no-header]"},
		Summary: "answer a question from the index, instantly, even while gen writes it",
		Run:     runQuery,
	}, {
		Name:    "plot",
		Usage:   []string{plot.Usage},
		Summary: plot.Summary,
		Run:     runPlot,
	}, {
		Name:    "shell",
		Usage:   []string{"shell"},
		Summary: "ask the same questions interactively (type help there); watch a run",
		Run:     runShell,
	}, {
		Name:    "web",
		Usage:   []string{"web [--listen HOST:PORT]"},
		Summary: "the run and every answer in a local browser page, live, read-only",
		Run:     runWeb,
	}, {
		Name:    "help",
		Usage:   []string{"help [COMMAND|TOPIC]"},
		Summary: "this text, a command's flags, or a topic (a section of README)",
		Run:     runHelp,
	}}
}

// lookup returns the command called name, or nil.
func lookup(name string) *Command {
	for _, cmd := range commands {
		if cmd.Name == name {
			return cmd
		}
	}
	return nil
}

func main() {
	env := &Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		StdoutTTY: isTerminal(os.Stdout), StdinTTY: isTerminal(os.Stdin), StderrTTY: isTerminal(os.Stderr),
		Getenv: os.Getenv, Now: time.Now,
	}
	ctx, stop := context.Background(), func() {}
	if _, name, _ := splitCommand(os.Args[1:]); !(name == "shell" && env.StdinTTY && env.StdoutTTY) {
		// The interactive shell handles Ctrl-C itself: it cancels the
		// running command, not the shell.
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	stopProfile := startProfile(env)
	err := run(ctx, env, os.Args[1:])
	stop()
	stopProfile()
	os.Exit(exitCode(messages(env), err))
}

// exitOnSecondInterrupt quits the process with status 130 on the first
// interrupt that arrives after ctx is done, for commands whose shutdown
// waits on work in flight (gen waits --grace for its answers). The
// function last stored in before, if any, runs first, for at most 2 s.
func exitOnSecondInterrupt(ctx context.Context, stderr io.Writer, before *atomic.Pointer[func()]) {
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		<-again
		fmt.Fprintln(stderr, "gendex: interrupted twice: quitting now")
		if f := before.Load(); f != nil {
			done := make(chan struct{})
			go func() { (*f)(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
		os.Exit(130)
	}()
}

// run runs one command line (without the program name) and returns what
// exitCode turns into the exit status.
func run(ctx context.Context, env *Env, args []string) error {
	global, name, args := splitCommand(args)
	globalDB, global, err := takeDB(global)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("gendex", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(global); errors.Is(err, flag.ErrHelp) {
		printUsage(env.Stdout)
		return nil
	} else if err != nil {
		return usagef("%v", err)
	}
	if name == "" {
		printUsage(env.Stderr)
		return usagef("no command given")
	}
	cmd := lookup(name)
	if cmd == nil {
		return usagef("unknown command %q (want one of %s)", name, commandNames())
	}
	cmdDB, args, err := takeDB(args)
	if err != nil {
		return usageOf(name, usagef("%s: %v", name, err))
	}
	c := &call{cmd: cmd, env: env, db: dbPath(env, cmdDB, globalDB)}
	return usageOf(name, cmd.Run(ctx, c, args))
}

// splitCommand splits a command line at its command word, the first
// argument that is neither a flag nor --db's value (or the argument after
// "--"): it returns the global flags before it, the word ("" if there is
// none) and the command's arguments.
func splitCommand(args []string) (global []string, name string, rest []string) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			if i+1 == len(args) {
				return args, "", nil
			}
			return args[:i+1], args[i+1], args[i+2:]
		case a == "--db" || a == "-db":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return args[:i], a, args[i+1:]
		}
	}
	return args, "", nil
}

// takeDB takes every --db FILE (also -db FILE, --db=FILE and -db=FILE)
// out of args, up to a "--", and returns the last FILE given ("" if none)
// and the other arguments in their order. It is the one parser of --db,
// for the global flags and for every command's arguments alike.
func takeDB(args []string) (file string, rest []string, err error) {
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			return file, append(rest, args[i:]...), nil
		case a == "--db" || a == "-db":
			if i+1 == len(args) {
				return "", nil, usagef("--db needs a FILE")
			}
			i++
			file = args[i]
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			file = a[strings.IndexByte(a, '=')+1:]
		default:
			rest = append(rest, a)
		}
	}
	return file, rest, nil
}

// dbPath picks the index file: the command's --db, the global --db,
// $GENDEX_DB, or ./gendex.db.
func dbPath(env *Env, cmdDB, globalDB string) string {
	switch {
	case cmdDB != "":
		return cmdDB
	case globalDB != "":
		return globalDB
	case env.Getenv("GENDEX_DB") != "":
		return env.Getenv("GENDEX_DB")
	}
	return "gendex.db"
}

// usageError is a mistake in how gendex was called (exit 2). cmd names the
// command whose help the message points to ("" for gendex's own).
type usageError struct{ cmd, msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// usageOf returns err with every usage mistake (a usageError, a
// question's query.ErrUsage, or live.ErrUsage for what --listen asks) as a
// usageError pointing to command name.
func usageOf(name string, err error) error {
	if name == "help" {
		name = "" // help's mistakes are answered by gendex's usage
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return &usageError{cmd: name, msg: ue.msg}
	case errors.Is(err, query.ErrUsage), errors.Is(err, live.ErrUsage):
		return &usageError{cmd: name, msg: strings.TrimPrefix(err.Error(), "usage: ")}
	}
	return err
}

// errHelp: -h was asked for; the usage has been printed (exit 0).
var errHelp = errors.New("help")

// errSkipped: the command did its work but left input lines out (exit 1).
var errSkipped = errors.New("some lines were skipped")

// exitCode prints err's message to stderr, "gendex: " first, and returns
// the exit status (exitStatuses says which).
func exitCode(stderr io.Writer, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "gendex: %s\n", ue.msg)
		fmt.Fprintf(stderr, "Run '%s' for usage.\n", strings.TrimSpace("gendex help "+ue.cmd))
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "gendex: interrupted")
		return 130
	case errors.Is(err, errSkipped):
		return 1
	}
	fmt.Fprintf(stderr, "gendex: %v\n", err)
	switch {
	case errors.Is(err, store.ErrNoIndex), errors.Is(err, store.ErrBadIndex):
		return exitNoIndex
	case errors.Is(err, store.ErrNotFound):
		return exitNotFound
	case errors.Is(err, gen.ErrRefused):
		return exitRefused
	}
	return 1
}
