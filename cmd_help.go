package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"gendex/store/terminal"
)

// runHelp prints gendex's usage, or with a COMMAND that command's help
// (what 'gendex COMMAND -h' prints), or with a TOPIC that section of
// README.md (helpTopics), to stdout. A command that is a topic too (gen,
// query, ...) prints its help first, then its section of README: flags
// first, as 'gendex COMMAND -h', and the details after them.
func runHelp(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("help: give at most one COMMAND or TOPIC")
	}
	var cmd *Command
	var topic *helpTopic
	if len(pos) == 1 {
		cmd, topic = lookup(pos[0]), lookupTopic(pos[0])
		if cmd == nil && topic == nil {
			return usagef("help: unknown command or topic %q (commands: %s; topics: %s)", pos[0], commandNames(), topicNames())
		}
	}
	var out bytes.Buffer
	env := *c.env
	env.Stdout = &out
	width, height := stdoutSize(c.env)
	switch {
	case len(pos) == 0:
		printUsage(&out)
	case cmd != nil:
		err := cmd.Run(ctx, &call{cmd: cmd, env: &env, db: c.db}, []string{"-h"})
		if err != nil && !errors.Is(err, errHelp) {
			return err
		}
		if topic != nil {
			fmt.Fprintln(&out)
			err = printTopic(&out, topic, width)
		}
		if err2 := page(c.env, out.Bytes(), height); err2 != nil {
			return err2
		}
		return err
	default:
		if err := printTopic(&out, topic, width); err != nil {
			return err
		}
	}
	return page(c.env, out.Bytes(), height)
}

// stdoutSize returns the columns and lines of the terminal stdout is
// (helpWidth and 0 when it is none, or its size is unknown).
func stdoutSize(env *Env) (cols, rows int) {
	f, ok := env.Stdout.(*os.File)
	if !ok || !env.StdoutTTY {
		return helpWidth, 0
	}
	cols, rows = terminal.Size(f.Fd())
	if cols <= 0 {
		cols = helpWidth
	}
	return cols, rows
}

// page writes text to stdout: through $PAGER (less -FRX when $PAGER is
// not set and less is installed) when stdout is a terminal of height
// lines and text is longer; directly otherwise, when $PAGER is set empty
// or to cat, and when the pager cannot start.
func page(env *Env, text []byte, height int) error {
	pager, set := env.Getenv("PAGER"), true
	if pager == "" {
		_, set = os.LookupEnv("PAGER")
	}
	if !set {
		if _, err := exec.LookPath("less"); err == nil {
			pager = "less -FRX"
		}
	}
	if height <= 0 || bytes.Count(text, []byte("\n")) < height || strings.TrimSpace(pager) == "" || strings.TrimSpace(pager) == "cat" {
		_, err := env.Stdout.Write(text)
		return err
	}
	cmd := exec.Command("sh", "-c", pager)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(text), env.Stdout, env.Stderr
	if err := cmd.Start(); err != nil {
		_, err := env.Stdout.Write(text)
		return err
	}
	// A pager quit before the end (q in less) is no error of help's; one
	// the shell did not find (127) printed nothing.
	var exit *exec.ExitError
	if err := cmd.Wait(); errors.As(err, &exit) && exit.ExitCode() == 127 {
		_, err := env.Stdout.Write(text)
		return err
	}
	return nil
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

// helpWidth is the width every line of gendex's help fits
// (TestHelpFitsEighty).
const helpWidth = 80

// wrapTo writes text wrapped within helpWidth, its first line starting
// with first and the others with indent.
func wrapTo(w io.Writer, text, first, indent string) {
	for _, l := range terminal.Wrap(text, helpWidth, first, indent) {
		fmt.Fprintln(w, l)
	}
}

// writeUsageLine writes a usage line ("gendex ..."), wrapped within
// helpWidth with its continuation lines under the command's arguments.
func writeUsageLine(w io.Writer, first, usage string) {
	name, _, _ := strings.Cut(usage, " ")
	wrapTo(w, "gendex "+usage, first, strings.Repeat(" ", len(first)+len("gendex ")+len(name)+1))
}

// printUsage writes gendex's usage: the command list and the questions,
// within helpWidth.
func printUsage(w io.Writer) {
	fmt.Fprint(w, "gendex: generate synthetic datasets with an LLM server and ask about them\ninstantly.\n\n")
	fmt.Fprint(w, "Usage:\n  gendex [--db FILE] COMMAND [ARGS]\n\n")
	fmt.Fprint(w, "Commands:\n")
	for _, cmd := range commands {
		for _, u := range cmd.Usage {
			writeUsageLine(w, "  ", u)
		}
		wrapTo(w, cmd.Summary, "      ", "      ")
	}
	fmt.Fprint(w, "\nQuestions (gendex query QUESTION):\n")
	writeQuestions(w, "  ")
	fmt.Fprintln(w)
	for _, p := range []string{
		dbNote,
		"Output is a table on a terminal (fitted to its width) and TSV with a header when piped; --format table|tsv|csv|json.",
		"gen and ingest --follow take --listen HOST:PORT to serve Prometheus /metrics (--listen-queries: the answers too); " +
			"beyond loopback they need $GENDEX_TOKEN, which clients send as Authorization: Bearer; the answers always need a token " +
			"($GENDEX_TOKEN, else a random one: printed on a terminal, else kept in <index>.listen.token, a file only you can read, " +
			"its path printed), and a request for another Host than the listener's own gets 421.",
		exitStatuses,
	} {
		wrapTo(w, p, "", "")
	}
	writeTopicList(w)
	fmt.Fprintln(w)
	wrapTo(w, "Run 'gendex help COMMAND' for a command's flags (and its section of README.md, when it has one), 'gendex help TOPIC' for a topic.", "", "")
}

// printHelp writes the command's help: its usage lines, its summary and,
// when fs is not nil, fs's flags grouped by purpose (see writeFlags).
func (c *call) printHelp(w io.Writer, fs *flag.FlagSet) {
	for i, u := range c.cmd.Usage {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		writeUsageLine(w, prefix, u)
	}
	fmt.Fprintln(w)
	wrapTo(w, c.cmd.Summary, "", "")
	if fs != nil {
		writeFlags(w, c.cmd.Name, fs)
	}
	fmt.Fprintln(w)
	wrapTo(w, dbNote, "", "")
}

// The flag groups, in help order.
const (
	groupServers  = "Servers and API"
	groupSampling = "Sampling (sent to the server only when given; defaults named: SGLang's)"
	groupRun      = "Run control"
	groupInput    = "Input"
	groupRecords  = "Training records"
	groupLive     = "Live view and metrics"
	groupSim      = "The built-in simulator (--server sim)"
	groupSimOwn   = "The simulated server"
	groupQuestion = "Output and question flags (anywhere on the line)"
	groupOther    = "Flags"
)

var groupOrder = []string{groupQuestion, groupServers, groupInput, groupSampling, groupRun, groupRecords, groupLive, groupSimOwn, groupSim, groupOther}

// flagGroups names each flag's group, by the flag's name; a command's own
// entry ("export/format") wins. sim-* flags are the simulator's (gen's
// --server sim), and gendex sim's own flags are its server's.
var flagGroups = map[string]string{
	"server": groupServers, "api": groupServers, "api-key": groupServers, "api-key-file": groupServers,
	"model": groupServers, "tool-call-parser": groupServers, "wait-ready": groupServers, "down-limit": groupServers, "concurrency": groupServers, "request-timeout": groupServers,
	"max-new-tokens": groupSampling, "min-new-tokens": groupSampling, "temperature": groupSampling, "top-p": groupSampling,
	"top-k": groupSampling, "min-p": groupSampling, "frequency-penalty": groupSampling, "presence-penalty": groupSampling,
	"repetition-penalty": groupSampling, "ignore-eos": groupSampling, "skip-special-tokens": groupSampling,
	"no-stop-trim": groupSampling, "stop": groupSampling, "stop-token-ids": groupSampling, "seed": groupSampling, "mix": groupSampling,
	"samples": groupSampling,
	"out":     groupRun, "retry-errors": groupRun, "allow-mixed": groupRun, "turns": groupRun, "grace": groupRun, "max-attempts": groupRun,
	"max-crashes": groupRun, "shard": groupRun,
	"follow": groupInput, "reread": groupInput, "dataset": groupInput, "stage": groupInput, "id": groupInput, "prompt": groupInput,
	"ingest/field": groupInput, "ingest/map": groupInput, "ingest/explain": groupInput, "ingest/lines": groupInput, "ingest/format": groupInput,
	"export": groupRecords, "include-truncated": groupRecords, "exclude-tool-stops": groupRecords, "max-len": groupRecords, "reasoning": groupRecords,
	"export/format": groupRecords, "export/out": groupRecords, "export/server": groupServers,
	"listen": groupLive, "listen-queries": groupLive, "scrape-every": groupLive,
	"check/include-truncated": groupOther,
	"sim/listen":              groupSimOwn, "sim/unmarked": groupSimOwn,
}

// flagArgs names the value of each flag that takes one, by the flag's
// name; the others are named by their type.
var flagArgs = map[string]string{
	"server": "URL", "api": "generate|chat|completions", "api-key": "KEY", "api-key-file": "FILE", "model": "NAME", "tool-call-parser": "NAME",
	"out": "DIR", "turns": "all|last", "export": "conversations|ids", "format": "conversations|ids",
	"reasoning": "keep|drop", "listen": "HOST:PORT", "shard": "I/N", "dataset": "NAME", "stage": "STAGE", "id": "PATH", "prompt": "PATH",
	"ingest/field": "KEY=PATH", "ingest/map": "KEY=PATH,...", "ingest/format": "text|json",
	"stop": "TEXT", "stop-token-ids": "IDS", "seed": "N", "mix": "KEY=SPEC", "samples": "N", "max-new-tokens": "N", "min-new-tokens": "N", "top-k": "N",
	"temperature": "X", "top-p": "X", "min-p": "X", "frequency-penalty": "X", "presence-penalty": "X",
	"repetition-penalty": "X", "max-len": "N", "query/format": "table|tsv|csv|json", "query/window": "DURATION",
	"check/format": "table|json|tsv|csv", "check/max-length": "N", "check/ids": "REASON", "query/max-length": "N",
	"query/since": "DURATION", "query/stage": "STAGE", "query/step": "DURATION", "query/quiet": "DURATION", "lora": "NAME", "flavor": "sglang|vllm|llamacpp", "crash-on": "TEXT",
}

// flagSentences replaces, in help, the flag descriptions that are no
// sentence ("SGLang default 0"), by the flag's name.
var flagSentences = map[string]string{
	"frequency-penalty":  "penalize tokens by how often they appeared so far (SGLang default 0)",
	"presence-penalty":   "penalize tokens that appeared at all so far (SGLang default 0)",
	"repetition-penalty": "scale down the odds of tokens seen before; 1.0 is off (SGLang default 1.0)",
	"seed":               "sampling seed (sampling_seed), for answers that repeat (SGLang default: random)",
}

// flagGroup returns the group of flag name in command cmd.
func flagGroup(cmd, name string) string {
	if g, ok := flagGroups[cmd+"/"+name]; ok {
		return g
	}
	switch cmd {
	case "sim":
		return groupSimOwn
	case "query":
		return groupQuestion
	}
	if strings.HasPrefix(name, "sim-") {
		return groupSim
	}
	if g, ok := flagGroups[name]; ok {
		return g
	}
	return groupOther
}

// flagArg returns the name of the value flag f of command cmd takes (""
// for a switch).
func flagArg(cmd string, f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	if a, ok := flagArgs[cmd+"/"+f.Name]; ok {
		return a
	}
	if a, ok := flagArgs[strings.TrimPrefix(f.Name, "sim-")]; ok {
		return a
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "int", "uint":
		return "N"
	case "float":
		return "X"
	case "duration":
		return "DURATION"
	case "string":
		return "TEXT"
	}
	return "VALUE"
}

// flagDefault says a flag's default, for its help: "" when its sentence
// says it already.
func flagDefault(cmd string, f *flag.Flag) string {
	if strings.Contains(f.Usage, "default") {
		return ""
	}
	switch d := f.DefValue; {
	case flagArg(cmd, f) == "":
		if d == "true" {
			return "Default: on."
		}
		return "Default: off."
	case d == "":
		return "Default: none."
	case d == "0" || d == "0s":
		return "Default: 0."
	case strings.HasSuffix(d, "m0s"):
		d = strings.TrimSuffix(d, "0s")
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		return "Default: " + d + "."
	default:
		return "Default: " + d + "."
	}
}

// writeFlags writes fs's flags under their groups' headings, each with
// its --double-dash name, its value, what it does and its default, within
// helpWidth.
func writeFlags(w io.Writer, cmd string, fs *flag.FlagSet) {
	groups := map[string][]*flag.Flag{}
	fs.VisitAll(func(f *flag.Flag) { groups[flagGroup(cmd, f.Name)] = append(groups[flagGroup(cmd, f.Name)], f) })
	const col = 26 // where descriptions start
	for _, g := range groupOrder {
		if len(groups[g]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", g)
		for _, f := range groups[g] {
			name := "  --" + f.Name
			if a := flagArg(cmd, f); a != "" {
				name += " " + a
			}
			usage := strings.TrimPrefix(f.Usage, "simulator: ")
			if s, ok := flagSentences[f.Name]; ok {
				usage = s
			}
			if !strings.HasSuffix(usage, ".") {
				usage += "."
			}
			text := strings.TrimSpace(usage + " " + flagDefault(cmd, f))
			first := name + strings.Repeat(" ", max(col-len(name), 1))
			if len(name) > col-2 {
				fmt.Fprintln(w, name)
				first = strings.Repeat(" ", col)
			}
			wrapTo(w, text, first, strings.Repeat(" ", col))
		}
	}
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
