package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen"
	"gendex/query"
	"gendex/query/format"
	"gendex/query/live"
	"gendex/store"
)

// checkAnswers reads an answer line for check as export reads it to make
// the answer's record (query.AnswerReader): every assistant turn and the
// record's length.
func checkAnswers(line []byte, rec *store.Record, mapping string) (query.CheckedAnswer, error) {
	turns, tokens, err := export.ReadTurns(line, rec, mapping)
	a := query.CheckedAnswer{Tokens: tokens, Turns: make([]query.CheckedTurn, len(turns))}
	for i, t := range turns {
		a.Turns[i] = query.CheckedTurn{Text: t.Text, Reasoning: t.Reasoning, Calls: t.Calls}
	}
	return a, err
}

// checkReaders are what check reads the files with, by the rules of the
// parts that write them: answers as export reads them, the disk by the
// writers' own decision of a changed file (ingest.Changed), and the
// prompts to go by gen's rule of what it sends (gen.Unsendable: those it
// does not send for their shape get a fix with --prompt). Every check
// gendex runs gets them, in this process and in a writer's that answers
// the question on its socket.
func checkReaders() query.CheckReaders {
	return query.CheckReaders{Answers: checkAnswers, FileChanged: ingest.Changed, PromptUnsendable: gen.Unsendable}
}

// newAsker is live.NewAsker for the index at path, checking with
// checkReaders.
func newAsker(path string) *live.Asker {
	a := live.NewAsker(path)
	a.Readers = checkReaders()
	return a
}

// errNotReady: some dataset is not fit to train on (exit 1); the verdicts
// say why.
var errNotReady = fmt.Errorf("not ready to train on: %w", errSkipped)

// runCheck gives one verdict per dataset and one for all: ready to train
// on, or each reason it is not with its count and the command that fixes
// it. It exits 1 when a dataset is not ready.
func runCheck(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	maxLength := fs.String("max-length", "", "the drafter's training length in tokens: records longer than it, as export --max-len measures them, are a reason")
	includeTruncated := fs.Bool("include-truncated", false, "accept records of answers cut at the token limit (as export --include-truncated made them)")
	allowMixed := fs.Bool("allow-mixed", false, "accept a dataset answered by more than one model (still named)")
	allowSimulated := fs.Bool("allow-simulated", false, "accept answers made by the simulator, a dry run's (still named)")
	allowNoPrompt := fs.Bool("allow-no-prompt", false, "accept answers whose id matches no prompt (their prompts changed ids or left the prompts files): no record is made of them (still named)")
	formatName := fs.String("format", "table", "table (the verdicts, within 80 columns), json (one object, for CI), tsv or csv (one row per reason)")
	ids := fs.String("ids", "", "instead of the verdicts, print the ids of the answers the check counts for this reason, one a line (for gen --redo FILE; --format json: an array of dataset, id, sample): "+strings.Join(query.IDReasons, ", "))
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if *ids != "" && len(pos) == 0 {
		return usagef("check --ids %s: name the DATASET or DIR whose ids to list", *ids)
	}
	f, err := query.ParseFormat(*formatName)
	if err != nil {
		return usagef("check: %v", err)
	}
	words := []string{"check"}
	if *maxLength != "" {
		if n, err := strconv.Atoi(*maxLength); err != nil || n <= 0 {
			return usagef("check: --max-length %q: want a positive number of tokens (the drafter's training length)", *maxLength)
		}
		words = append(words, "--max-length", *maxLength)
	}
	if *includeTruncated {
		words = append(words, "--include-truncated")
	}
	if *allowMixed {
		words = append(words, "--allow-mixed")
	}
	if *allowSimulated {
		words = append(words, "--allow-simulated")
	}
	if *allowNoPrompt {
		words = append(words, "--allow-no-prompt")
	}
	if *ids != "" {
		words = append(words, "--ids", *ids)
	}
	asker := newAsker(c.db)
	defer asker.Close()
	now := c.env.Now()
	names, err := checkTargets(ctx, asker, c, pos)
	if err != nil {
		return err
	}
	res, err := query.AskWords(ctx, asker, now, append(append(words, "--"), names...)...)
	if err != nil {
		return err
	}
	if *ids != "" && f == query.JSON {
		return writeIDsJSON(c.env.Stdout, res, *ids, names)
	}
	if *ids != "" {
		return writeIDs(c.env.Stdout, res, *ids, names)
	}
	vs := verdictsOf(res)
	switch f {
	case query.JSON:
		err = writeVerdictsJSON(c.env.Stdout, vs)
	case query.TSV, query.CSV:
		out := format.NewWriter(c.env.Stdout, format.Options{Format: f})
		out.Columns(res.Columns)
		for _, row := range res.Rows {
			if err = out.Row(row); err != nil {
				break
			}
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	default:
		writeVerdicts(c.env.Stdout, vs)
	}
	if err != nil {
		return err
	}
	for _, v := range vs {
		if !v.Ready {
			return errNotReady
		}
	}
	return nil
}

// checkTargets resolves each argument to datasets: a dataset's name, or a
// folder (a root or a dataset's) under which some of a dataset's files
// lie. None: every dataset. A folder the index holds nothing under is
// "not there" (exit 3).
func checkTargets(ctx context.Context, a *live.Asker, c *call, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	files, err := query.AskWords(ctx, a, c.env.Now(), "files")
	if err != nil {
		return nil, err
	}
	byName := map[string][]string{} // dataset -> its files' paths
	for _, row := range files.Rows {
		ds, _ := files.Get(row, "dataset").(string)
		p, _ := files.Get(row, "path").(string)
		byName[ds] = append(byName[ds], p)
	}
	known := make([]string, 0, len(byName))
	for n := range byName {
		known = append(known, n)
	}
	sort.Strings(known)
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, arg := range args {
		if _, ok := byName[arg]; ok {
			add(arg)
			continue
		}
		if _, err := os.Stat(arg); err != nil {
			return nil, store.NotFound("check: %s is neither a dataset of the index nor a folder (%s)", arg, holds(known))
		}
		abs, err := ingest.CanonicalPath(arg)
		if err != nil {
			return nil, err
		}
		var found []string
		for _, name := range known {
			for _, p := range byName[name] {
				if p == abs || strings.HasPrefix(p, abs+string(os.PathSeparator)) {
					found = append(found, name)
					break
				}
			}
		}
		if len(found) == 0 {
			return nil, store.NotFound("check: the index holds no dataset with files under %s (%s); run 'gendex ingest %s' or 'gendex gen' first", abs, holds(known), arg)
		}
		for _, name := range found {
			add(name)
		}
	}
	return out, nil
}

// writeIDs writes check --ids' answer: an id a line, or, when the check
// covers more than one dataset, DATASET<TAB>ID (both as gen --redo FILE
// reads them; for a dataset of several samples each unit's sample too:
// ID<TAB>SAMPLE, or query missing's DATASET<TAB>raw<TAB>ID<TAB>SAMPLE).
// mixed_provenance's are always DATASET<TAB>ID: the other
// way's ids are often exactly a --redo list's, and gen takes the same
// list again for that redo, over (it would ask nothing); this list is
// another. No id is an error (exit 1).
func writeIDs(w io.Writer, res *query.Result, reason string, names []string) error {
	sampled := slices.Contains(res.Columns, "sample")
	for _, row := range res.Rows {
		ds, _ := res.Get(row, "dataset").(string)
		id, _ := res.Get(row, "id").(string)
		line := id
		switch {
		case sampled && (len(names) > 1 || reason == query.ReasonMixed):
			// query missing's row (DATASET, STAGE, ID, SAMPLE): the one
			// form of four fields gen --redo FILE reads as one unit
			line = fmt.Sprintf("%s\traw\t%s\t%v", ds, id, res.Get(row, "sample"))
		case sampled: // query missing --no-header's: ID<TAB>SAMPLE
			line = fmt.Sprintf("%s\t%v", id, res.Get(row, "sample"))
		case len(names) > 1 || reason == query.ReasonMixed:
			line = ds + "\t" + id
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	if len(res.Rows) == 0 {
		return fmt.Errorf("check --ids %s: no answer of %s is counted for %s", reason, strings.Join(names, ", "), reason)
	}
	return nil
}

// writeIDsJSON writes check --ids --format json's answer: an array of
// {"dataset", "id", "sample"}, one per answer, as query's JSON is laid
// out; sample is 0 in a dataset of one sample per prompt. No id is [] and
// the error writeIDs gives (exit 1).
func writeIDsJSON(w io.Writer, res *query.Result, reason string, names []string) error {
	out := format.NewWriter(w, format.Options{Format: query.JSON})
	out.Columns([]string{"dataset", "id", "sample"})
	for _, row := range res.Rows {
		sample := res.Get(row, "sample")
		if sample == nil {
			sample = 0
		}
		if err := out.Row([]any{res.Get(row, "dataset"), res.Get(row, "id"), sample}); err != nil {
			return err
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	if len(res.Rows) == 0 {
		return fmt.Errorf("check --ids %s: no answer of %s is counted for %s", reason, strings.Join(names, ", "), reason)
	}
	return nil
}

// A verdict is one dataset's: ready, or its reasons.
type verdict struct {
	Dataset string        `json:"dataset"`
	Ready   bool          `json:"ready"`
	Reasons []checkReason `json:"reasons"`
}

type checkReason struct {
	Reason string `json:"reason"`
	Blocks bool   `json:"blocks"`
	Count  any    `json:"count"`
	Tokens any    `json:"tokens,omitempty"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// verdictsOf groups the check's rows by dataset.
func verdictsOf(res *query.Result) []verdict {
	var vs []verdict
	for _, row := range res.Rows {
		name, _ := res.Get(row, "dataset").(string)
		if len(vs) == 0 || vs[len(vs)-1].Dataset != name {
			ready, _ := res.Get(row, "ready").(bool)
			vs = append(vs, verdict{Dataset: name, Ready: ready, Reasons: []checkReason{}})
		}
		reason, _ := res.Get(row, "reason").(string)
		if reason == "" {
			continue
		}
		blocks, _ := res.Get(row, "blocks").(bool)
		detail, _ := res.Get(row, "detail").(string)
		fix, _ := res.Get(row, "fix").(string)
		v := &vs[len(vs)-1]
		v.Reasons = append(v.Reasons, checkReason{Reason: reason, Blocks: blocks, Count: res.Get(row, "count"),
			Tokens: res.Get(row, "tokens"), Detail: detail, Fix: fix})
	}
	return vs
}

// writeVerdicts writes the verdicts for a person, within helpWidth.
func writeVerdicts(w io.Writer, vs []verdict) {
	notReady := 0
	for _, v := range vs {
		state := "ready"
		if !v.Ready {
			state = "NOT READY"
			notReady++
		}
		wrapTo(w, v.Dataset+": "+state, "", "  ")
		for _, r := range v.Reasons {
			head := "note: "
			if r.Blocks {
				head = ""
			}
			n := "unknown"
			if r.Count != nil {
				n = fmt.Sprint(r.Count)
			}
			if r.Tokens != nil {
				n += fmt.Sprintf(" (%v tokens)", r.Tokens)
			}
			wrapTo(w, fmt.Sprintf("%s%s %s: %s", head, r.Reason, n, r.Detail), "  ", "    ")
			if r.Fix != "" {
				wrapTo(w, "fix: "+r.Fix, "    ", "      ")
			}
		}
	}
	switch {
	case len(vs) == 0:
		fmt.Fprintln(w, "all: no dataset to check")
	case len(vs) == 1 && notReady == 0:
		fmt.Fprintln(w, "all: ready (1 dataset)")
	case notReady == 0:
		fmt.Fprintf(w, "all: ready (%d datasets)\n", len(vs))
	case len(vs) == 1:
		fmt.Fprintln(w, "all: NOT READY (1 dataset)")
	default:
		fmt.Fprintf(w, "all: NOT READY (%d of %d datasets)\n", notReady, len(vs))
	}
}

// writeVerdictsJSON writes the verdicts as one object: ready for all, and
// each dataset's.
func writeVerdictsJSON(w io.Writer, vs []verdict) error {
	ready := len(vs) > 0
	for _, v := range vs {
		ready = ready && v.Ready
	}
	if vs == nil {
		vs = []verdict{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		Ready    bool      `json:"ready"`
		Datasets []verdict `json:"datasets"`
	}{ready, vs}); err != nil {
		return errors.Join(errors.New("writing the verdicts"), err)
	}
	return nil
}
