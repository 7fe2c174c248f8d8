package query

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gendex/store"
)

// sum adds known values; one unknown makes the sum unknown.
type sum struct {
	v       uint64
	unknown bool
}

func (s *sum) add(v any) {
	switch x := v.(type) {
	case uint64:
		s.v += x
	case int64:
		s.v += uint64(x)
	default:
		s.unknown = true
	}
}

func (s sum) value() any {
	if s.unknown {
		return nil
	}
	return s.v
}

func pct(num, den uint64) any {
	if den == 0 {
		return nil
	}
	return Fixed{100 * float64(num) / float64(den), 2}
}

func summaries(v *store.View, names []string) ([]store.Summary, error) {
	out := make([]store.Summary, 0, len(names))
	for _, n := range names {
		s, err := v.Summary(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ranker finds nearest-rank percentiles in one pass over a histogram given
// in increasing order, when the total count n is known in advance.
type ranker struct {
	qs      []float64
	n, seen int64
	i       int
	out     []any
}

func newRanker(n int64, qs ...float64) *ranker {
	return &ranker{qs: qs, n: n, out: make([]any, len(qs))}
}

func (r *ranker) add(v, c int64) {
	r.seen += c
	for r.i < len(r.qs) && float64(r.seen) >= r.qs[r.i]*float64(r.n) {
		r.out[r.i] = v
		r.i++
	}
}

// sumHist adds histograms: dense below denseLimit tokens, sparse above.
type sumHist struct {
	dense  []int64
	sparse map[int64]int64
	n      int64
}

const denseLimit = 1 << 20

func (h *sumHist) add(v, c int64) {
	h.n += c
	if v >= denseLimit {
		if h.sparse == nil {
			h.sparse = map[int64]int64{}
		}
		h.sparse[v] += c
		return
	}
	if int(v) >= len(h.dense) {
		h.dense = append(h.dense, make([]int64, int(v)+1-len(h.dense))...)
	}
	h.dense[v] += c
}

func (h *sumHist) percentiles(qs ...float64) []any {
	r := newRanker(h.n, qs...)
	for v, c := range h.dense {
		if c > 0 {
			r.add(int64(v), c)
		}
	}
	big := make([]int64, 0, len(h.sparse))
	for v := range h.sparse {
		big = append(big, v)
	}
	slices.Sort(big)
	for _, v := range big {
		r.add(v, h.sparse[v])
	}
	return r.out
}

// noteSampledPrompts says once per samples count N > 1 which datasets ask
// N samples per prompt, so their prompt_tokens count each prompt N times.
func noteSampledPrompts(sums []store.Summary, out Sink) error {
	by := map[uint64][]string{}
	var ns []uint64
	for _, s := range sums {
		if n := s.Samples(); n > 1 {
			if by[n] == nil {
				ns = append(ns, n)
			}
			by[n] = append(by[n], s.Dataset)
		}
	}
	slices.Sort(ns)
	for _, n := range ns {
		note := fmt.Sprintf("%s has %d samples per prompt: its prompt_tokens sum each sample's request, its prompt counted %d times, as the server did", by[n][0], n, n)
		if names := by[n]; len(names) > 1 {
			list := strings.Join(names, ", ")
			if len(names) > 4 {
				list = fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
			}
			note = fmt.Sprintf("%d datasets (%s) have %d samples per prompt: their prompt_tokens sum each sample's request, a prompt counted %d times, as the server did", len(names), list, n, n)
		}
		if err := out.Note(note); err != nil {
			return err
		}
	}
	return nil
}

// tokens: sums over the records that carry a count; unknown_tokens counts
// responses without a completion count, unknown_prompt_tokens those without
// a prompt count. A sum over no known record is unknown, not 0:
// reasoning_tokens (inside completion_tokens) sums the answers that say
// how many of their tokens were reasoning, unknown when none does. truncated
// and skipped are as in progress: responses cut at the token limit (their
// completion tokens are in the sums), lines left out (whose tokens no sum
// can hold).
func tokens(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	if err := noteSampledPrompts(sums, out); err != nil {
		return err
	}
	out.Columns([]string{"dataset", "records", "prompt_tokens", "completion_tokens", "reasoning_tokens", "avg_completion_tokens",
		"p50_completion_tokens", "p90_completion_tokens", "p99_completion_tokens", "unknown_tokens", "unknown_prompt_tokens", "truncated", "skipped"})
	var all sumHist
	var tot store.Stats
	var truncated, skipped uint64
	for _, s := range sums {
		r := s.Stage(store.Raw)
		rank := newRanker(int64(r.Records-r.UnknownCompletion), 0.50, 0.90, 0.99)
		v.Histogram(s.Dataset, func(base int64, counts []int64) {
			for i, c := range counts {
				if c > 0 {
					rank.add(base+int64(i), c)
					all.add(base+int64(i), c)
				}
			}
		})
		if err := out.Row(tokenRow(s.Dataset, &r, rank.out, s.Truncated(), s.Skipped())); err != nil {
			return err
		}
		truncated += s.Truncated()
		skipped += s.Skipped()
		tot.Records += r.Records
		tot.PromptTokens += r.PromptTokens
		tot.CompletionTokens += r.CompletionTokens
		tot.UnknownCompletion += r.UnknownCompletion
		tot.UnknownPrompt += r.UnknownPrompt
		tot.ReasoningTokens += r.ReasoningTokens
		tot.ReasoningRecords += r.ReasoningRecords
	}
	return out.Total(tokenRow("TOTAL", &tot, all.percentiles(0.50, 0.90, 0.99), truncated, skipped))
}

func tokenRow(name string, r *store.Stats, p []any, truncated, skipped uint64) []any {
	var prompt, completion, reasoning, avg any
	if known := r.Records - r.UnknownPrompt; known > 0 {
		prompt = r.PromptTokens
	}
	if r.ReasoningRecords > 0 {
		reasoning = r.ReasoningTokens
	}
	if known := r.Records - r.UnknownCompletion; known > 0 {
		completion = r.CompletionTokens
		avg = Fixed{float64(r.CompletionTokens) / float64(known), 1}
	}
	if r.Records == 0 {
		prompt, completion = uint64(0), uint64(0)
	}
	return []any{name, r.Records, prompt, completion, reasoning, avg, p[0], p[1], p[2], r.UnknownCompletion, r.UnknownPrompt, truncated, skipped}
}

// throughput: responses that finished in the window ending now, by their own
// finish time (or the time they were indexed), measured by the store's one
// rate model (store.RateSpan): every answer up to the moment asked, the
// current second's so far included, over the seconds gone by (window_s:
// the window and the current second's part), and a dataset's window starts
// no earlier than its first response, so a run that began 10 s ago is
// measured over 10 s, not diluted over 30. TOTAL is the same rule over the datasets with a
// response in the window (store.TotalRate). accept_length is Σ completion
// tokens / Σ verify steps of the window's answers that carry SGLang's
// speculative decoding counts (unknown when none does); TOTAL's sums the
// datasets' windows.
func throughput(v *store.View, names []string, window time.Duration, now time.Time, out Sink) error {
	out.Columns([]string{"dataset", "window_s", "records", "completion_tokens", "records_per_s", "tokens_per_s", "unknown_tokens", "accept_length"})
	rates := make([]store.Rate, 0, len(names))
	var specTokens, specVerify int64
	for _, n := range names {
		first, ok := v.FirstSecond(n)
		r := store.RateSpan(now, window, first, ok)
		r.Records, r.Tokens, r.Unknown = v.Window(n, r.From, r.To)
		_, st, sv := v.SpecWindow(n, r.From, r.To)
		specTokens += st
		specVerify += sv
		rates = append(rates, r)
		if err := out.Row(rateRow(n, r, st, sv)); err != nil {
			return err
		}
	}
	return out.Total(rateRow("TOTAL", store.TotalRate(now, window, rates), specTokens, specVerify))
}

func rateRow(name string, r store.Rate, specTokens, specVerify int64) []any {
	var tok, tokRate any = r.Tokens, nil
	if perSec, ok := r.TokensPerSecond(); ok {
		tokRate = Fixed{perSec, 1}
	} else {
		tok = nil
	}
	return []any{name, Seconds(r.Secs), r.Records, tok, Fixed{r.PerSecond(), 2}, tokRate, r.Unknown,
		AcceptLength(uint64(max(specTokens, 0)), uint64(max(specVerify, 0)))}
}

// finish: responses per finish reason: the fixed finishColumns, then any
// other reason seen, the most common first; "unknown" counts responses
// whose reason the index cannot know (they carry none, or say "unknown").
func finish(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	all := map[string]uint64{}
	finishes := make([]map[string]uint64, len(sums)) // each dataset's, mapped onto gendex's reasons
	for i, s := range sums {
		r := s.Stage(store.Raw)
		finishes[i] = r.Finishes()
		for k, c := range finishes[i] {
			if k != "unknown" { // a literal "unknown" joins the unknown column
				all[k] += c
			}
		}
	}
	reasons := slices.Clone(finishColumns)
	for _, k := range sortedKeys(all) {
		if !slices.Contains(finishColumns, k) {
			reasons = append(reasons, k)
		}
	}
	cols := []string{"dataset", "records"}
	for _, k := range reasons {
		if k == "dataset" || k == "records" {
			k = "finish_" + k // keep column names unique
		}
		cols = append(cols, k)
	}
	out.Columns(append(cols, "unknown"))
	total := make([]any, len(reasons)+3)
	var tr, tu uint64
	for i, s := range sums {
		r := s.Stage(store.Raw)
		row := []any{s.Dataset, r.Records}
		var named uint64
		for _, k := range reasons {
			row = append(row, finishes[i][k])
			named += finishes[i][k]
		}
		row = append(row, r.Records-named)
		tr += r.Records
		tu += r.Records - named
		if err := out.Row(row); err != nil {
			return err
		}
	}
	total[0], total[1] = "TOTAL", tr
	for i, k := range reasons {
		total[i+2] = all[k]
	}
	total[len(total)-1] = tu
	return out.Total(total)
}

// errorList: failed requests with no response since, one row each. When
// a dataset listed has several samples per prompt (gen --samples), each
// row names the id and its sample (column sample), as missing does.
func errorList(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	sampled := slices.ContainsFunc(sums, func(s store.Summary) bool { return s.Samples() > 1 })
	if sampled {
		out.Columns([]string{"dataset", "id", "sample", "reason", "message", "source"})
	} else {
		out.Columns([]string{"dataset", "id", "reason", "message", "source"})
	}
	for _, n := range names {
		var ids []string
		if err := v.Missing(n, store.Errors, func(id string) error { ids = append(ids, id); return nil }, store.Raw); err != nil {
			return err
		}
		for _, id := range ids {
			r, ok, err := v.Get(n, store.Errors, id)
			if err != nil || !ok {
				return err
			}
			path, _ := v.FilePath(r.File)
			row := []any{n, id, r.Finish, r.Message, fmt.Sprintf("%s:%d", path, r.Line)}
			if sampled {
				pid, sample := store.SplitUnit(id)
				row = append([]any{n, pid, sample}, row[2:]...)
			}
			if err := out.Row(row); err != nil {
				return err
			}
		}
	}
	return nil
}

// datasetList: every dataset with its files and its record counts per
// stage, the turns of conversations and the exclusions among them.
func datasetList(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	out.Columns([]string{"dataset", "files", "prompts", "raw", "tokenized", "errors", "turns", "excluded"})
	for _, s := range sums {
		var files uint64
		for _, st := range store.Stages() {
			files += s.Stage(st).Files
		}
		row := []any{s.Dataset, files, s.Stage(store.Prompts).Records, s.Stage(store.Raw).Records,
			s.Stage(store.Tokenized).Records, s.Stage(store.Errors).Records, s.Stage(store.Turns).Records, s.Stage(store.Excluded).Records}
		if err := out.Row(row); err != nil {
			return err
		}
	}
	return nil
}

// fileList: every file of the datasets, with where the index stands in
// it; a file gone from the disk and forgotten is no longer one of them. pending_bytes is what lies past the last indexed line: an unfinished
// line, or lines written since the last ingest.
func fileList(v *store.View, names []string, out Sink) error {
	out.Columns([]string{"dataset", "stage", "path", "lines", "records", "duplicates", "skipped", "unknown_tokens", "indexed_bytes", "pending_bytes"})
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return v.Files(func(fs store.FileState) error {
		if !want[fs.Dataset] {
			return nil
		}
		var pending any
		fi, err := os.Stat(fs.Path)
		if err == nil {
			pending = max(0, fi.Size()-fs.Offset)
		} else if fs.ID == 0 && errors.Is(err, os.ErrNotExist) {
			return nil // gone, and forgotten: the index holds nothing of it
		}
		return out.Row([]any{fs.Dataset, fs.Stage.String(), fs.Path, fs.Lines, fs.Records, fs.Duplicates + fs.ErrorDuplicates,
			fs.Skipped, fs.Unknown, fs.Offset, pending})
	})
}

// show: the stored line of one record, read at its offset. Without --stage
// it looks in raw, errors, prompts, tokenized, excluded and turns (whose
// ids are ID#TURN), in that order. --sample S names sample S of the id
// (unitKey); the prompts stage holds one line for all its samples.
func show(v *store.View, name string, q Query, out Sink) error {
	order := []store.Stage{store.Raw, store.Errors, store.Prompts, store.Tokenized, store.Excluded, store.Turns}
	if q.StageSet {
		order = []store.Stage{q.Stage}
	}
	asked := fmt.Sprintf("id %q", q.ID)
	if q.Sample > 0 {
		asked += fmt.Sprintf(" sample %d", q.Sample)
		s, err := v.Summary(name)
		if err != nil {
			return err
		}
		switch n := s.Samples(); {
		case n == 1:
			return store.NotFound("dataset %s has one sample per prompt (0): no sample %d", name, q.Sample)
		case uint64(q.Sample) >= n:
			return store.NotFound("dataset %s has %d samples per prompt (0 to %d): no sample %d", name, n, n-1, q.Sample)
		}
	}
	for _, st := range order {
		r, ok, err := v.Get(name, st, unitKey(st, q.ID, q.Sample))
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		path, ok := v.FilePath(r.File)
		if !ok {
			return fmt.Errorf("dataset %s %s: its file (id %d) is no longer in the index", name, asked, r.File)
		}
		line, err := readLine(path, r.Offset, r.Length)
		if err != nil {
			return fmt.Errorf("dataset %s %s: %w", name, asked, err)
		}
		if store.LineSum(line) != r.Sum {
			return fmt.Errorf("dataset %s %s: %s:%d no longer holds this record (the file changed since it was indexed; gendex ingest --reread %s reads it again)", name, asked, path, r.Line, quoteArg(path))
		}
		return out.Line(line)
	}
	if q.StageSet && q.Stage == store.Turns && !strings.Contains(q.ID, "#") {
		return store.NotFound("dataset %s has no turns record with %s (a turn's id is ID#TURN, e.g. %s#1)", name, asked, q.ID)
	}
	if q.StageSet {
		return store.NotFound("dataset %s has no %s record with %s", name, q.Stage, asked)
	}
	return store.NotFound("dataset %s has no record with %s", name, asked)
}

func readLine(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("reading %s at byte %d: %w", path, off, err)
	}
	return buf, nil
}
