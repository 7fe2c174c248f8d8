package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/store"
)

// runIngest indexes JSONL files and, with --follow, keeps indexing what is
// appended and added until interrupted.
func runIngest(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	follow := fs.Bool("follow", false, "keep indexing new lines and files until interrupted")
	dataset := fs.String("dataset", "", "dataset name for a single file (default: its folder's name)")
	stageName := fs.String("stage", "", "stage for a single file: prompts, raw, tokenized or errors")
	mf := addMapFlags(fs)
	ex := addExplainFlags(fs)
	reread := fs.Bool("reread", false, "forget each FILE given and read it again whole, as the dataset and stage the index holds it under (a file changed where no end of it shows: check's files_changed)")
	listen := addListenFlags(fs, "with --follow: ")
	paths, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("ingest: give at least one PATH (a dataset root, a dataset folder or a file)")
	}
	var stage *store.Stage
	if *stageName != "" {
		st, err := store.ParseStage(*stageName)
		if err != nil {
			return usagef("ingest: %v", err)
		}
		stage = &st
	}
	spec, err := mf.spec()
	if err != nil {
		return err
	}
	if done, err := ex.run(c, paths, spec, *dataset, stage, *follow || *reread || *listen.addr != "" || *listen.queries); done {
		return err
	}
	if *reread && (*follow || *dataset != "" || stage != nil || spec != "") {
		return usagef("ingest: --reread reads files as the index holds them (dataset, stage, --id): give it none of --follow, --dataset, --stage, --id, --field, --map")
	}
	if err := checkMappings(paths, spec, *dataset, stage); err != nil {
		return err
	}
	db, err := store.Open(c.db, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if (*listen.addr != "" || *listen.queries) && !*follow {
		return usagef("ingest: --listen goes with --follow")
	}
	stopLive, err := listen.serve(c.env, db, nil, 0)
	if err != nil {
		return err
	}
	defer stopLive()
	if *reread {
		return ingestReread(ctx, c.env, db, paths)
	}

	rep := &ingest.Reporter{W: messages(c.env)}
	ix := &ingest.Indexer{DB: db, Report: rep.Report}
	discover := func() ([]ingest.Source, error) {
		var all []ingest.Source
		for _, p := range paths {
			srcs, err := ingest.Discover(p, *dataset, stage)
			if err != nil {
				return nil, err
			}
			for i := range srcs {
				srcs[i].IDPath = idPathFor(srcs[i], p, spec)
			}
			all = append(all, srcs...)
		}
		// The disk is the truth, at the start and as a follow goes:
		// counted files gone or changed are forgotten, moved ones found.
		if err := ix.CheckDisk(ctx, all); err != nil {
			return nil, err
		}
		if *dataset == "" { // named by their folders: see ingest.CheckPlaces
			if err := ingest.CheckPlaces(db, all); err != nil {
				return nil, err
			}
		}
		return all, nil
	}
	srcs, err := discover()
	if errors.Is(err, ingest.ErrStageNeedsFile) {
		return usagef("ingest: %v", err)
	}
	if err != nil {
		return err
	}
	if len(srcs) == 0 && !*follow {
		return fmt.Errorf("no prompts*, raw_responses*, tokenized* or errors* .jsonl files under %s", strings.Join(paths, ", "))
	}
	start := c.env.Now()
	var total ingest.FileResult
	files, unchanged := 0, 0
	for _, src := range srcs {
		res, err := ix.IndexFile(ctx, src)
		accumulate(&total, res)
		files++
		if res.Unchanged {
			unchanged++
		}
		if res.Torn > 0 && !*follow {
			rep.Report(ingest.Problem{Path: src.Path, Line: res.NextLine, Kind: ingest.Torn,
				Msg: fmt.Sprintf("last line has no newline (%d bytes); not indexed until it is completed (if the file is finished, add the newline: echo >> FILE)", res.Torn)})
		}
		if err != nil {
			return err
		}
	}
	ix.SayForgotten()
	elapsed := c.env.Now().Sub(start)
	fmt.Fprintf(messages(c.env), "indexed %d new records from %d files (%d unchanged, %s read) in %s\n",
		total.Added, files, unchanged, humanBytes(total.Bytes), elapsed.Round(time.Millisecond))
	if *follow {
		return ingestFollow(ctx, c.env, ix, rep, discover)
	}
	return ingestVerdict(messages(c.env), rep)
}

func accumulate(t *ingest.FileResult, r ingest.FileResult) {
	t.Added += r.Added
	t.Duplicates += r.Duplicates
	t.Skipped += r.Skipped
	t.Unknown += r.Unknown
	t.Bytes += r.Bytes
}

// ingestVerdict prints the problem summary and says whether lines were skipped.
func ingestVerdict(w io.Writer, rep *ingest.Reporter) error {
	if rep.Total() > 0 {
		fmt.Fprintln(w, "problems by file:")
		rep.Summary(w)
	}
	if n := rep.Skipped(); n > 0 {
		fmt.Fprintf(w, "gendex: %d lines were skipped (invalid JSON, no id, or beyond the index's limits); everything else is indexed\n", n)
		return errSkipped
	}
	if n := rep.Count(ingest.Torn); n > 0 {
		fmt.Fprintf(w, "gendex: %d files end in a line without a newline, not indexed yet; everything else is indexed\n", n)
		return errSkipped
	}
	return nil
}

// ingestFollow keeps indexing until ctx is done: changed files every 200 ms,
// new datasets and files every second.
func ingestFollow(ctx context.Context, env *Env, ix *ingest.Indexer, rep *ingest.Reporter, discover func() ([]ingest.Source, error)) error {
	say := messages(env)
	fmt.Fprintln(say, "following; Ctrl-C to stop")
	run := startFollowRun(ix.DB, env.Now()) // its row in query runs (runs.go)
	defer func() { run.end(ctx, env.Now()) }()
	var srcs []ingest.Source
	lastDiscover := time.Time{}
	lastLog := env.Now()
	var added int
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if time.Since(lastDiscover) >= time.Second {
			s, err := discover()
			if err != nil {
				fmt.Fprintf(say, "warning: %v\n", err)
			} else {
				srcs = s
			}
			lastDiscover = time.Now()
		}
		for _, src := range srcs {
			res, err := ix.IndexFile(ctx, src)
			added += res.Added
			run.indexed(res.Added, env.Now())
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(say, "warning: %v\n", err)
			}
		}
		ix.SayForgotten()
		if now := env.Now(); added > 0 && now.Sub(lastLog) >= 10*time.Second {
			fmt.Fprintf(say, "%s indexed %d new records\n", now.Format(time.TimeOnly), added)
			added, lastLog = 0, now
		}
		select {
		case <-ctx.Done():
			if added > 0 {
				fmt.Fprintf(say, "indexed %d new records\n", added)
			}
			ingestVerdict(say, rep)
			return nil
		case <-tick.C:
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// idPathFor is the --id/--map path ingest gives src, found under the PATH
// argument arg: the files it names (arg itself, or a folder's prompts and
// the answer files of other tools), never gen's own answer, error and
// turn files (ingest.GenOwned), whose ids are gen's "id".
func idPathFor(src ingest.Source, arg, spec string) string {
	if spec == "" || src.Stage == store.Prompts {
		return spec
	}
	if real, err := ingest.CanonicalPath(arg); err == nil && real == src.Path {
		return spec // named on the command line: as told
	}
	if ingest.GenOwned(src.Path) {
		return ""
	}
	return spec
}

// mapFlags are the flags that say where a file's lines keep gendex's
// fields: --id, --field (repeated) and --map.
type mapFlags struct {
	id, mapping *string
	fields      fieldFlags
}

func addMapFlags(fs *flag.FlagSet) *mapFlags {
	m := &mapFlags{}
	m.id = fs.String("id", "", "where the lines keep their id: a dotted path such as question_id or meta.uid (remembered per file; a file indexed under another path is indexed again)")
	fs.Var(&m.fields, "field", "for a shape gendex does not know: where its lines keep a field, once per field, KEY one of "+
		strings.Join(ingest.MappedFields[:], ", ")+", PATH as --id's (e.g. completion_tokens=stats.out); kept with the file for every later ingest; checked in its first lines")
	m.mapping = fs.String("map", "", "the fields of --field in one flag: KEY=PATH pairs joined by commas (with --field: both)")
	return m
}

// spec is the mapping the flags give, in its text form ("" for none).
func (m *mapFlags) spec() (string, error) {
	if strings.Contains(*m.id, "=") || strings.Contains(*m.id, ",") {
		return "", usagef("ingest: --id %q: a dotted path (give the other fields with --field KEY=PATH)", *m.id)
	}
	spec, err := ingest.JoinMapping(*m.id, m.fields.join(*m.mapping))
	if err != nil {
		return "", usagef("ingest: --id/--field/--map: %v", err)
	}
	return spec, nil
}

// fieldFlags are the values of --field, each KEY=PATH.
type fieldFlags []string

func (f *fieldFlags) String() string { return strings.Join(*f, ",") }

func (f *fieldFlags) Set(v string) error {
	key, path, ok := strings.Cut(v, "=")
	if !ok || key == "" || path == "" || strings.Contains(path, ",") {
		return fmt.Errorf("want KEY=PATH, KEY one of %s, PATH keys joined by dots (e.g. completion_tokens=stats.out)", strings.Join(ingest.MappedFields[:], ", "))
	}
	*f = append(*f, v)
	return nil
}

// join is the fields as --map's pairs, after those of mapping (--map).
func (f fieldFlags) join(mapping string) string {
	all := []string(f)
	if mapping != "" {
		all = append([]string{mapping}, all...)
	}
	return strings.Join(all, ",")
}

// checkMappings checks, before anything is indexed (or the index opened),
// that each path of the mapping spec matches in the first lines of every
// file it is given to (ingest.CheckMapping); a path that matches nothing
// is a usage error (exit 2) naming the file, the path and the keys there.
// There is no way to insist: the map is kept with the file, so a wrong
// path would read every later line of it as unknown; a field a line may
// well lack (an error, reasoning) is checked up to its object only.
func checkMappings(paths []string, spec, dataset string, stage *store.Stage) error {
	if spec == "" {
		return nil
	}
	var msgs []string
	for _, p := range paths {
		srcs, err := ingest.Discover(p, dataset, stage)
		if err != nil {
			return nil // said when the files are indexed
		}
		for _, src := range srcs {
			src.IDPath = idPathFor(src, p, spec)
			var me *ingest.MappingError
			if err := ingest.CheckMapping(src); errors.As(err, &me) {
				msgs = append(msgs, me.Error())
			} else if err != nil {
				return err
			}
		}
	}
	if len(msgs) > 0 {
		return usagef("ingest: %s", strings.Join(msgs, "\n"))
	}
	return nil
}

// explainFlags are ingest --explain and its own flags.
type explainFlags struct {
	on     *bool
	lines  *int
	format *string
}

func addExplainFlags(fs *flag.FlagSet) *explainFlags {
	return &explainFlags{
		on:     fs.Bool("explain", false, "write nothing: say how each FILE's first lines read, field by field and from where in the line, or why a line is skipped (with --field, --map, --id as given, else as the index holds the file)"),
		lines:  fs.Int("lines", 5, "with --explain: how many of each file's first lines"),
		format: fs.String("format", "text", "with --explain: text (within 80 columns) or json (one object a line)"),
	}
}

// run explains the files at paths when --explain is given (done), and
// refuses --lines and --format without it; writing says a flag that
// writes (--follow, --reread, --listen) was given too.
func (e *explainFlags) run(c *call, paths []string, spec, dataset string, stage *store.Stage, writing bool) (done bool, err error) {
	switch {
	case !*e.on && (*e.format != "text" || *e.lines != 5):
		return true, usagef("ingest: --format and --lines go with --explain")
	case !*e.on:
		return false, nil
	case writing:
		return true, usagef("ingest: --explain writes nothing: give it none of --follow, --reread, --listen")
	}
	return true, ingestExplain(c, paths, spec, dataset, stage, *e.lines, *e.format)
}

// ingestExplain says how each FILE's first lines read (ingest.Explain),
// with the mapping spec, else the one the index keeps for the file; it
// writes nothing, and opens the index (read-only) only when it exists.
func ingestExplain(c *call, paths []string, spec, dataset string, stage *store.Stage, lines int, format string) error {
	if format != "text" && format != "json" {
		return usagef("ingest: --format %q: want text or json", format)
	}
	if lines < 1 {
		return usagef("ingest: --lines %d: want 1 or more", lines)
	}
	var srcs []ingest.Source
	var names []string // each source's file as given
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return usagef("ingest --explain: %s is a folder; give the files to explain", p)
		}
		st := stage
		if st == nil {
			if _, err := ingest.Discover(p, dataset, nil); errors.Is(err, ingest.ErrStageNeedsFile) || err != nil {
				raw := store.Raw // a file of any name: read as answers
				st = &raw
			}
		}
		found, err := ingest.Discover(p, dataset, st)
		if err != nil {
			return err
		}
		for range found {
			names = append(names, p)
		}
		srcs = append(srcs, found...)
	}
	busy := false // the index is held by a writer: its maps unread
	if spec == "" {
		err := storedMappings(c.db, srcs)
		if busy = errors.Is(err, store.ErrLocked); err != nil && !busy {
			return err
		}
	} else {
		for i := range srcs {
			srcs[i].IDPath = spec
		}
	}
	out := c.env.Stdout
	for i, src := range srcs {
		reps, err := ingest.Explain(src, lines)
		if err != nil {
			return err
		}
		if len(reps) == 0 { // nothing read is nothing explained: never a silent 0
			return fmt.Errorf("ingest --explain: %s has no lines: nothing to explain", names[i])
		}
		for j := range reps {
			reps[j].File = names[i]
		}
		if format == "json" {
			enc := json.NewEncoder(out)
			for _, r := range reps {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			continue
		}
		how := "the built-in rules"
		if busy {
			how += " (the index is in use by a writer: a map it keeps for the file is not read; give it with --field)"
		}
		if src.IDPath != "" {
			how = "the map " + ingest.MappingFlags(src.IDPath)
		}
		n := fmt.Sprintf("its first %d lines", len(reps))
		if len(reps) == 1 {
			n = "its first line"
		}
		fmt.Fprintln(out, names[i])
		wrapTo(out, fmt.Sprintf("%s, read as stage %s, with %s", n, src.Stage, how), "  ", "    ")
		ingest.WriteExplained(out, reps)
	}
	return nil
}

// storedMappings gives each source the mapping the index at dbPath keeps
// for its file, if the index exists and holds it; store.ErrLocked when a
// writer holds the index.
func storedMappings(dbPath string, srcs []ingest.Source) error {
	if _, err := os.Stat(dbPath); err != nil {
		return nil // no index: nothing kept
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(v *store.View) error {
		for i := range srcs {
			st, ok, err := v.File(srcs[i].Path)
			if err != nil {
				return err
			}
			if ok {
				srcs[i].IDPath = st.IDPath
			}
		}
		return nil
	})
}
