package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// runExport writes a training record or an exclusion for every answer
// that has neither, per the index. It exits 1 when answers are left for a
// later run (their prompts not indexed, or a --server needed).
func runExport(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	format := fs.String("format", "conversations", "conversations (SpecForge: role/content turns) or ids (input_ids + loss_mask)")
	out := fs.String("out", "", "write DIR/<dataset>/tokenized.jsonl and excluded.jsonl instead of beside the answers")
	server := fs.String("server", "", "an SGLang server with the model's tokenizer, for --format ids of answers whose prompt ids are in neither the answer nor the prompt (sim: the built-in simulator's, for gen --server sim's answers)")
	records := recordFlags(fs, "export")
	apiKeyFile := fs.String("api-key-file", "", "read the --server's API key from this file (default $SGLANG_API_KEY)")
	paths, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("export: give at least one ROOT or DATASET_DIR holding raw_responses*.jsonl")
	}
	cfg, err := records(*format)
	if err != nil {
		return err
	}
	cfg.Now = c.env.Now
	// A test hook: TestExportSurvivesSIGKILL flushes every few KiB, so
	// that its kills land between writes, fsyncs and commits.
	if n, err := strconv.Atoi(c.env.Getenv("GENDEX_EXPORT_FLUSH_BYTES")); err == nil && n > 0 {
		cfg.FlushBytes = n
	}
	switch {
	case *server == "sim":
		// gen --server sim's answers: the simulator's tokenizer gives
		// their prompts' ids, as it did for gen.
		simURL, stop, err := startSim(ctx, sim.Config{})
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(messages(c.env), "export: --server sim: the built-in simulator's tokenizer at %s (for answers made by gen --server sim)\n", simURL)
		cfg.Tokenizer = export.ServerTokenizer{C: client.New(simURL, client.Options{Concurrency: 16})}
	case *server != "":
		if u, err := url.Parse(*server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("export: --server %q: want a server URL, http://HOST:PORT (or sim: the built-in simulator's tokenizer, for answers made by gen --server sim)", *server)
		}
		key := c.env.Getenv("SGLANG_API_KEY")
		if *apiKeyFile != "" {
			if key, err = readAPIKey(*apiKeyFile); err != nil {
				return err
			}
		}
		cfg.Tokenizer = export.ServerTokenizer{C: client.New(*server, client.Options{APIKey: key, Concurrency: 16})}
	}
	sets, err := export.Find(paths, *out)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return fmt.Errorf("no raw_responses*.jsonl files under %s", strings.Join(paths, ", "))
	}
	db, err := store.Open(c.db, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	rep := &ingest.Reporter{W: messages(c.env)}
	logf := func(format string, a ...any) { fmt.Fprintf(messages(c.env), format+"\n", a...) }
	cfg.Logf = logf
	// ReleaseAbove: the index pages that export's walks and lookups touch
	// all over the file stay in the page cache, not in its RSS.
	x := &export.Exporter{Ix: &ingest.Indexer{DB: db, Report: rep.Report, ReleaseAbove: 32 << 20}, Config: cfg}
	var srcs []ingest.Source
	for _, d := range sets {
		srcs = append(srcs, d.Sources...)
		srcs = append(srcs, ingest.Source{Path: d.Tokenized(), Dataset: d.Name, Stage: store.Tokenized},
			ingest.Source{Path: d.Excluded(), Dataset: d.Name, Stage: store.Excluded})
	}
	if err := x.Ix.CheckDisk(ctx, srcs); err != nil {
		return err
	}
	start := c.env.Now()
	left := 0
	// Refused before anything is written: records of another folder in
	// the index, or of the other format in the output.
	plan := &exportPlan{c: c, fs: fs, paths: paths, format: cfg.Format, db: db}
	if err := plan.check(*out); err != nil {
		return err
	}
	for _, d := range sets {
		res, err := x.Export(ctx, d)
		if res.Todo > 0 || err != nil {
			printExportResult(messages(c.env), &res, d, *format)
		}
		if err != nil {
			return err
		}
		if res.Todo == 0 {
			own, _, err := export.Where(db, d)
			if err != nil {
				return err
			}
			own.Dir = plan.show(own.Dir)
			logf("export: nothing to do: every answer of %s has a record or an exclusion in %s", d.Name, own)
		}
		left += res.LeftNoPrompt() + res.LeftNeedsServer() + res.LeftBadPrompt()
		if n := res.LeftNeedsServer(); n > 0 && *server == "" {
			logf("export: %s: %d answers need their prompts tokenized: run again with --server URL (a server with the same tokenizer)", d.Name, n)
		}
	}
	x.Ix.SayForgotten()
	logf("export: done in %s", c.env.Now().Sub(start).Round(time.Millisecond))
	if left > 0 {
		// Exit 1, as for input lines left out: a script must not take
		// the records for complete.
		logf("gendex: %d answers have neither a record nor an exclusion yet (see above); run export again when that is fixed", left)
		return errSkipped
	}
	return nil
}

// printExportResult prints one dataset's line: records, exclusions by
// reason, answers left and why.
func printExportResult(w io.Writer, r *export.Result, d export.Dataset, format string) {
	var ex []string
	reasons := make([]string, 0, len(r.Excluded))
	for reason := range r.Excluded {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	total := 0
	for _, reason := range reasons {
		ex = append(ex, fmt.Sprintf("%s %d", reason, r.Excluded[reason]))
		total += r.Excluded[reason]
	}
	line := fmt.Sprintf("export: %s: %d answers: %d %s records, %d excluded", d.Name, r.Todo, r.Records, format, total)
	if len(ex) > 0 {
		line += " (" + strings.Join(ex, ", ") + ")"
	}
	left := r.LeftNoPrompt() + r.LeftNeedsServer() + r.LeftBadPrompt()
	line += fmt.Sprintf(", %d left; %s", left, humanBytes(r.AnswerBytes))
	fmt.Fprintln(w, line)
	switch {
	case r.Unwritten:
		fmt.Fprintf(w, "export: %s: stopped by the error below before all of these were written; what was written is indexed, the rest is exported on the next run\n", d.Name)
	case r.Records+total > 0:
		fmt.Fprintf(w, "export: %s: wrote %s and %s\n", d.Name, d.Tokenized(), d.Excluded())
	}
	if n := r.LeftNoPrompt(); n > 0 {
		fmt.Fprintf(w, "export: %s: %d answers left: their prompts are not in the index; index them (gendex ingest PROMPTS_DIR, or give the prompts' folder to export too), then export again\n", d.Name, n)
	}
	if n := r.LeftBadPrompt(); n > 0 {
		fmt.Fprintf(w, "export: %s: %d answers left: their prompt lines are not prompts (%s)\n", d.Name, n, strings.Join(r.BadPrompts, "; "))
	}
	if r.LenUnknown > 0 {
		fmt.Fprintf(w, "export: %s: %d records have no token count, so --max-len was not checked for them\n", d.Name, r.LenUnknown)
	}
	if r.OwnTurns > 0 {
		fmt.Fprintf(w, "export: %s: %d earlier turns were rendered by the server otherwise than the model generated them: their records hold the model's own ids there, under loss\n", d.Name, r.OwnTurns)
	}
}

// exportPlan is what an export was asked, for checking, before anything
// is written, that its records can go where it was asked, and for
// writing a command that works when they cannot.
type exportPlan struct {
	c      *call
	fs     *flag.FlagSet // the parsed flags, to repeat them
	paths  []string
	format export.Format
	db     *store.DB // c.db, open
}

// check returns the refusal of an export into out (--out; "": beside the
// answers) with the index c.db, or nil when it may go ahead. A dataset's
// records in the index must be those of its output folder (else they
// stand in for the records of that folder, which stays empty), and its
// tokenized.jsonl must hold no records of the other format.
func (p *exportPlan) check(out string) error {
	probs, elsewhere, err := p.problems(p.c.db, out)
	if err != nil || len(probs) == 0 {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "export: refused, nothing written:\n")
	for _, pr := range probs {
		fmt.Fprintf(&b, "  %s\n", pr)
	}
	wanted := "beside the answers"
	if out != "" {
		wanted = "in " + p.show(absPath(out))
	}
	// Where the user asked, with an index of its own; or, when that
	// folder holds records of the other format, a folder of their own.
	or := ""
	if db, o, ok := p.ownIndex(out); ok {
		or = "Or, to"
		if o == out {
			fmt.Fprintf(&b, "To write the %s records %s, give them an index of their own (an index holds one record per answer):\n", p.format, wanted)
		} else {
			fmt.Fprintf(&b, "To write the %s records too, write them into a folder of their own, with an index of their own (an index holds one record per answer, a file one format):\n", p.format)
		}
		fmt.Fprintf(&b, "    %s\n", p.command(db, o))
	}
	if o, ok := p.whereTheyAre(elsewhere, out); ok {
		if or == "" {
			or = "To"
		}
		fmt.Fprintf(&b, "%s complete the records this index has where they are:\n    %s\n", or, p.command(p.c.db, o))
	}
	if p.format == export.IDs && p.flagSet("server") == "" {
		fmt.Fprintf(&b, "(Answers whose prompt ids are in neither the answer nor the prompt also need --server URL, a server with the model's tokenizer: --server sim for gen --server sim's answers.)\n")
	}
	return errors.New(strings.TrimSuffix(b.String(), "\n"))
}

// problems returns, one line per dataset, what stops an export into out
// with the index at dbPath, and which of them are records elsewhere. An
// index that does not exist yet holds nothing.
func (p *exportPlan) problems(dbPath, out string) (probs []string, elsewhere []*export.ElsewhereError, err error) {
	sets, err := export.Find(p.paths, out)
	if err != nil {
		return nil, nil, err
	}
	db := p.db
	if !sameFile(dbPath, p.c.db) {
		db = nil
		if _, err := os.Stat(dbPath); err == nil {
			if db, err = store.Open(dbPath, store.Options{ReadOnly: true, Timeout: 2 * time.Second}); err != nil {
				return []string{err.Error()}, nil, nil
			}
			defer db.Close()
		}
	}
	var held map[string][]store.FileState
	if db != nil {
		if err := db.View(func(v *store.View) (err error) { held, err = ingest.HeldFiles(v); return err }); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range sets {
		// The answers a record is built from must be the ones the index
		// counts for the dataset, and the records must not sit beside
		// other answers (a dry run's records beside the real run's).
		if pr := p.answerProblem(d, held[d.Name], dbPath); pr != "" {
			probs = append(probs, pr)
			continue
		}
		if db != nil {
			_, el, err := export.Where(db, d)
			if err != nil {
				return nil, nil, err
			}
			if len(el) > 0 {
				elsewhere = append(elsewhere, &export.ElsewhereError{Dataset: d.Name, Out: d.Out, Elsewhere: el})
				probs = append(probs, fmt.Sprintf("%s: the index %s holds its records and exclusions in %s, not in %s",
					d.Name, p.show(dbPath), p.places(el), p.show(d.Out)))
				continue
			}
		}
		if have, ok, err := export.FileFormat(d.Tokenized()); err != nil {
			return nil, nil, err
		} else if ok && have != p.format {
			probs = append(probs, fmt.Sprintf("%s: %s holds %s records; %s records would mix two formats in one file", d.Name, p.show(d.Tokenized()), have, p.format))
			continue
		}
		if db != nil {
			reason, other, n, err := export.OtherFormatExclusions(db, d.Name, p.format)
			if err != nil {
				return nil, nil, err
			}
			if n > 0 {
				probs = append(probs, fmt.Sprintf("%s: the index %s excluded %d of its answers as %s, making %s records; it holds one record or exclusion per answer", d.Name, p.show(dbPath), n, reason, other))
			}
		}
	}
	return probs, elsewhere, nil
}

// answerProblem says what stops records of d from being built from d's
// answers (its raw, errors and turns files): the index (holding held for
// d) counts the dataset's answers in another folder, or d.Out, the records'
// folder, holds answers of its own other than these. "" when neither.
func (p *exportPlan) answerProblem(d export.Dataset, held []store.FileState, dbPath string) string {
	dirs := map[string]bool{}
	for _, s := range d.Sources {
		if kind, ok := ingest.PlaceKind(s.Stage); !ok || kind != "answers" {
			continue
		}
		dir := filepath.Dir(s.Path)
		dirs[dir] = true
		if el := ingest.Elsewhere(held, s.Stage, dir); len(el) > 0 {
			var where []string
			for _, f := range ingest.Folders(el) {
				where = append(where, p.show(f))
			}
			return fmt.Sprintf("%s: the index %s counts its answers in %s, not the ones in %s: answers in one folder never stand in for another's",
				d.Name, p.show(dbPath), strings.Join(where, " and "), p.show(dir))
		}
	}
	if dirs[d.Out] || len(dirs) == 0 {
		return ""
	}
	if own, _ := filepath.Glob(filepath.Join(d.Out, "raw_responses*.jsonl")); len(own) > 0 {
		var from []string
		for dir := range dirs {
			from = append(from, p.show(dir))
		}
		sort.Strings(from)
		return fmt.Sprintf("%s: %s holds answers of its own (%s); records made from the answers in %s would sit beside answers they were not made from",
			d.Name, p.show(d.Out), filepath.Base(own[0]), strings.Join(from, " and "))
	}
	return ""
}

// places says where records are and how many.
func (p *exportPlan) places(ps []export.Place) string {
	s := make([]string, len(ps))
	for i, pl := range ps {
		pl.Dir = p.show(pl.Dir)
		s[i] = pl.String()
	}
	return strings.Join(s, " and ")
}

// ownIndex returns an index and an output folder (--out; "": beside the
// answers) that an export with the same flags may use: out itself with an
// index of its own (OUT/gendex.db, or ROOT/gendex.db beside the answers),
// or, when out holds records of the other format, OUT-FORMAT (ROOT-FORMAT)
// with OUT-FORMAT/gendex.db; each checked as check would, so the command
// works as written.
func (p *exportPlan) ownIndex(out string) (db, o string, ok bool) {
	base := absPath(out)
	if out == "" {
		sets, err := export.Find(p.paths, "")
		if err != nil || len(sets) == 0 {
			return "", "", false
		}
		base = filepath.Dir(sets[0].Out) // the first dataset's root
	}
	var cands [][2]string
	for i := 1; i <= 3; i++ {
		cands = append(cands, [2]string{filepath.Join(base, numbered("gendex", i)+".db"), out})
	}
	for i := 1; i <= 3; i++ {
		dir := numbered(base+"-"+p.format.String(), i)
		cands = append(cands, [2]string{filepath.Join(dir, "gendex.db"), dir})
	}
	for _, c := range cands {
		if sameFile(c[0], p.c.db) || !exists(c[0]) && p.holdsOutputs(c[1]) {
			continue // a new index would read the records and exclusions there as its own
		}
		if probs, _, err := p.problems(c[0], c[1]); err == nil && len(probs) == 0 {
			return c[0], c[1], true
		}
	}
	return "", "", false
}

// holdsOutputs reports whether an export into out would find records or
// exclusions in a dataset's files there already.
func (p *exportPlan) holdsOutputs(out string) bool {
	sets, err := export.Find(p.paths, out)
	if err != nil {
		return false
	}
	for _, d := range sets {
		for _, path := range []string{d.Tokenized(), d.Excluded()} {
			if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
				return true
			}
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func numbered(s string, i int) string {
	if i == 1 {
		return s
	}
	return s + "-" + strconv.Itoa(i)
}

// whereTheyAre returns the --out ("": beside the answers) that puts every
// dataset's records where the index already holds them, when there is
// one and an export into it would not be refused.
func (p *exportPlan) whereTheyAre(elsewhere []*export.ElsewhereError, out string) (string, bool) {
	if len(elsewhere) == 0 {
		return "", false
	}
	beside, err := export.Find(p.paths, "")
	if err != nil {
		return "", false
	}
	answers := map[string]string{}
	for _, d := range beside {
		answers[d.Name] = d.Out
	}
	cand, first := "", true
	for _, e := range elsewhere {
		if len(e.Elsewhere) != 1 || e.Elsewhere[0].Gone {
			return "", false
		}
		dir, o := e.Elsewhere[0].Dir, ""
		if dir != answers[e.Dataset] {
			if filepath.Base(dir) != e.Dataset {
				return "", false
			}
			o = filepath.Dir(dir)
		}
		if !first && o != cand {
			return "", false
		}
		cand, first = o, false
	}
	if cand == absPath(out) || cand == out {
		return "", false
	}
	if probs, _, err := p.problems(p.c.db, cand); err != nil || len(probs) > 0 {
		return "", false
	}
	return cand, true
}

// command is this export's command line with the index db and --out out
// ("": beside the answers), quoted for a POSIX shell.
func (p *exportPlan) command(db, out string) string {
	args := []string{"gendex", "--db", p.show(db), "export"}
	p.fs.Visit(func(f *flag.Flag) {
		if f.Name == "out" {
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if f.Value.String() == "true" {
				args = append(args, "--"+f.Name)
			} else {
				args = append(args, "--"+f.Name+"=false")
			}
			return
		}
		args = append(args, "--"+f.Name, f.Value.String())
	})
	if out != "" {
		args = append(args, "--out", p.show(absPath(out)))
	}
	for _, a := range p.paths {
		if strings.HasPrefix(a, "-") {
			args = append(args, "--")
			break
		}
	}
	args = append(args, p.paths...)
	for i, a := range args {
		args[i] = ingest.ShellQuote(a)
	}
	return strings.Join(args, " ")
}

// flagSet returns the value of flag name when it was given, else "".
func (p *exportPlan) flagSet(name string) string {
	v := ""
	p.fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			v = f.Value.String()
		}
	})
	return v
}

// show returns path relative to the working directory when it lies
// under it, else absolute.
func (p *exportPlan) show(path string) string {
	abs := absPath(path)
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, abs); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return abs
}

func absPath(path string) string {
	if path == "" {
		return ""
	}
	if abs, err := ingest.CanonicalPath(path); err == nil {
		return abs
	}
	return path
}

// sameFile reports whether a and b name the same file (by path, or, when
// both exist, by identity).
func sameFile(a, b string) bool {
	if absPath(a) == absPath(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
