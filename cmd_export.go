package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen/sglang"
	"gendex/store"
)

// runExport writes a training record or an exclusion for every answer
// that has neither, per the index. It exits 1 when answers are left for a
// later run (their prompts not indexed, or a --server needed).
func runExport(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	format := fs.String("format", "conversations", "conversations (SpecForge: role/content turns) or ids (input_ids + loss_mask)")
	out := fs.String("out", "", "write DIR/<dataset>/tokenized.jsonl and excluded.jsonl instead of beside the answers")
	server := fs.String("server", "", "an SGLang server with the model's tokenizer, for --format ids of answers whose prompt ids are in neither the answer nor the prompt")
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
	if *server != "" {
		key := c.env.Getenv("SGLANG_API_KEY")
		if *apiKeyFile != "" {
			if key, err = readAPIKey(*apiKeyFile); err != nil {
				return err
			}
		}
		cfg.Tokenizer = export.ServerTokenizer{C: sglang.New(*server, sglang.Options{APIKey: key, Concurrency: 16})}
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
	rep := &ingest.Reporter{W: c.env.Stderr}
	logf := func(format string, a ...any) { fmt.Fprintf(c.env.Stderr, format+"\n", a...) }
	cfg.Logf = logf
	// ReleaseAbove: the index pages that export's walks and lookups touch
	// all over the file stay in the page cache, not in its RSS.
	x := &export.Exporter{Ix: &ingest.Indexer{DB: db, Report: rep.Report, ReleaseAbove: 32 << 20}, Config: cfg}
	start := c.env.Now()
	left := 0
	for _, d := range sets {
		if err := export.CheckFormat(d.Tokenized(), cfg.Format); err != nil {
			return err
		}
	}
	for _, d := range sets {
		res, err := x.Export(ctx, d)
		if res.Todo > 0 || err != nil {
			printExportResult(c.env.Stderr, &res, d, *format)
		}
		if err != nil {
			return err
		}
		if res.Todo == 0 {
			logf("export: nothing to do: every answer of %s has a record or an exclusion", d.Name)
		}
		left += res.LeftNoPrompt() + res.LeftNeedsServer() + res.LeftBadPrompt()
		if n := res.LeftNeedsServer(); n > 0 && *server == "" {
			logf("export: %s: %d answers need their prompts tokenized: run again with --server URL (a server with the same tokenizer)", d.Name, n)
		}
	}
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
	if r.Records+total > 0 {
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
	if r.Unmatched > 0 {
		fmt.Fprintf(w, "export: %s: %d earlier turns' output_ids were not found verbatim in their conversation's prompt ids: no loss on them\n", d.Name, r.Unmatched)
	}
}
