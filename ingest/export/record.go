package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// Format is the kind of training record export writes.
type Format int

const (
	// Conversations is SpecForge's training input:
	// {"id", "conversations": [{"role", "content"[, "reasoning_content"]}...]}.
	Conversations Format = iota
	// IDs is EAGLE's {"id", "input_ids", "loss_mask"}: the exact prompt ids
	// followed by the exact output ids.
	IDs
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "conversations":
		return Conversations, nil
	case "ids":
		return IDs, nil
	}
	return 0, fmt.Errorf("unknown format %q (want conversations or ids)", s)
}

// The exclusion reasons (the "reason" of an excluded.jsonl line).
const (
	ReasonLength      = "length"         // finish_reason length, without --include-truncated
	ReasonAbort       = "abort"          // finish_reason abort
	ReasonFiltered    = "content_filter" // finish_reason content_filter: a filter ended the answer
	ReasonNoOutputIDs = "no_output_ids"  // ids format, an answer without output_ids
	ReasonNoTurnLoss  = "no_turn_loss"   // ids format, an earlier turn that cannot be given its loss (turnloss.go)
	ReasonMaxLen      = "max_len"        // over --max-len
	ReasonNoText      = "no_text"        // conversations format, an answer without text
	ReasonIDsPrompt   = "ids_prompt"     // conversations format, a prompt of token ids
	ReasonBadAnswer   = "bad_answer"     // a line that is not an answer of the expected shape
	ReasonToolStop    = "tool_stop"      // a tool conversation stopped where the model departed from the data, with --exclude-tool-stops
)

// Reasons lists the exclusion reasons in the order export checks them.
var Reasons = []string{ReasonBadAnswer, ReasonAbort, ReasonFiltered, ReasonLength, ReasonToolStop, ReasonNoText, ReasonIDsPrompt, ReasonNoOutputIDs, ReasonNoTurnLoss, ReasonMaxLen}

// Tokenizer turns prompts into the ids a server would see: chat messages
// through the chat template (/v1/tokenize with messages), text as
// /generate tokenizes it (special tokens added). Its methods are called
// from several goroutines at once.
type Tokenizer interface {
	TokenizeMessages(ctx context.Context, messages []client.Message) ([]int, error)
	TokenizeText(ctx context.Context, text string) ([]int, error)
}

// why an answer is left for a later run (neither a record nor an exclusion).
type leftWhy int

const (
	leftNoPrompt    leftWhy = iota // its prompt is not in the index
	leftNeedsServer                // its prompt must be tokenized: --server
	leftBadPrompt                  // its prompt line is not a prompt
	numLeft
)

// outcome is what export does with one answer.
type outcome struct {
	record         []byte // job.dst with a tokenized line appended, with its newline
	reason, detail string // or an exclusion
	left           bool   // or neither, for now
	why            leftWhy
	note           string // what is wrong with a bad prompt
	lenUnknown     bool   // --max-len could not be checked: no token count
	ownTurns       int    // earlier turns put in as the model's own ids (turnloss.go)
}

func exclude(reason, format string, a ...any) outcome {
	return outcome{reason: reason, detail: fmt.Sprintf(format, a...)}
}

// job is one answer to decide, with what it needs.
type job struct {
	id   string
	rec  *store.Record
	line []byte
	path string         // the answer's file
	spec ingest.IDPath  // its file's mapping (ingest --map), nil for none
	pre  *ingest.Answer // the line read already (DecideLine); nil: decide reads it
	dst  []byte         // the record is appended to this
	// What prompt reads the prompt with, and into.
	entry     *entry
	read      reader
	p         prompt
	promptErr error // a read error: it stops the run
}

// where is the answer's file:line; or, for an answer not yet written
// (DecideLine), its file and id.
func (j *job) where() string {
	if j.rec.Line == 0 {
		return fmt.Sprintf("%s (the answer to %s)", j.path, j.id)
	}
	return fmt.Sprintf("%s:%d", j.path, j.rec.Line)
}

// decide turns an answer into a record, an exclusion or a reason to wait.
// It returns an error only for what stops the run (a tokenizer failure).
func (c *Config) decide(ctx context.Context, j *job) (outcome, error) {
	a, err := parseAnswer(j.line, j.rec, j.spec, j.pre)
	// An answer without its prompt is left before anything is decided of
	// it (its prompt may come), unless it makes its record alone: ids
	// with the prompt's ids in the answer.
	if !j.entry.hasPrompt && (err != nil || c.Format != IDs || a.turns[len(a.turns)-1].promptIDs == nil) {
		return outcome{left: true, why: leftNoPrompt}, nil
	}
	if err != nil {
		return exclude(ReasonBadAnswer, "%s: not an answer: %v", j.where(), err), nil
	}
	k := len(a.turns)
	turnOf := func(i int) string {
		if !a.conversation {
			return ""
		}
		return fmt.Sprintf("turn %d of %d: ", i+1, k)
	}
	for i, t := range a.turns {
		if t.finish == "abort" {
			return exclude(ReasonAbort, "%sfinish_reason abort: the server aborted the request", turnOf(i)), nil
		}
		if t.finish == store.FinishFilter {
			return exclude(ReasonFiltered, "%sfinish_reason content_filter: a content filter ended the answer, so its text is not what the model wrote whole", turnOf(i)), nil
		}
	}
	for i, t := range a.turns {
		if store.Truncated(t.finish) && !c.IncludeTruncated {
			return exclude(ReasonLength, "%sfinish_reason %s: cut off at the token limit (%s completion tokens); --include-truncated exports it",
				turnOf(i), t.finish, countText(t.completionTokens)), nil
		}
	}
	if o, ok := c.toolStopped(j); ok {
		return o, nil
	}
	var o outcome
	if c.Format == Conversations {
		o, err = c.conversation(j, a, turnOf)
	} else {
		o, err = c.ids(ctx, j, a, turnOf)
	}
	if o.record != nil {
		o.record = withAnswerSum(o.record, j.rec.Sum)
	}
	return o, err
}

// withAnswerSum puts the answer_sum of the answer a record was built from
// (its line's store.LineSum: ingest.AppendAnswerSum) last in the record
// that ends rec ("}\n"), so an index tells a record of a replaced answer
// from the files alone.
func withAnswerSum(rec []byte, sum uint32) []byte {
	rec = ingest.AppendAnswerSum(rec[:len(rec)-2], sum)
	return append(rec, "}\n"...)
}

func countText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

// conversation builds a conversations record.
func (c *Config) conversation(j *job, a answer, turnOf func(int) string) (outcome, error) {
	k := len(a.turns)
	for i, t := range a.turns {
		switch {
		case t.hasText():
		case t.outputIDs != nil:
			return exclude(ReasonNoText, "%sthe answer has no text (generated with --skip-tokenizer-init, or its content is null); export it with --format ids", turnOf(i)), nil
		default:
			return exclude(ReasonBadAnswer, "%s: %s%s line: %s", j.where(), turnOf(i), t.shape, t.noText), nil
		}
	}
	p, where, why, ok := j.prompt()
	if !ok {
		return outcome{left: true, why: why, note: where.String()}, nil
	}
	if p.ids != nil {
		return exclude(ReasonIDsPrompt, "the prompt (%s) is token ids (input_ids), not a conversation; its ids record: %s", where, IDsCommand(filepath.Dir(where.path), filepath.Dir(j.path))), nil
	}
	assistant := func(i int) message {
		m := message{Role: "assistant", Content: a.turns[i].content()}
		if c.KeepReasoning {
			m.ReasoningContent = a.turns[i].reasoning
		}
		m.ToolCalls, _ = ingest.ReadToolCalls(a.turns[i].toolCalls) // checked by toolCallsOf
		return m
	}
	var msgs []message
	switch {
	case p.text != nil:
		if a.conversation && k != 1 {
			return exclude(ReasonBadAnswer, "%s: the answer has %d turns, its prompt (%s) is one text", j.where(), k, where), nil
		}
		msgs = []message{{Role: "user", Content: *p.text}, assistant(k - 1)}
	case a.steps():
		var err error
		if msgs, err = p.toolMessages(a, assistant); err != nil {
			return exclude(ReasonBadAnswer, "%s: %v (its prompt: %s)", j.where(), err, where), nil
		}
	case a.conversation:
		if u := p.userTurns(); u != k {
			return exclude(ReasonBadAnswer, "%s: the answer has %d turns, its prompt (%s) %d user turns", j.where(), k, where, u), nil
		}
		msgs = p.interleave(assistant)
	default:
		msgs = append(append([]message(nil), p.upToLastUser()...), assistant(0))
	}
	var o outcome
	last := a.turns[k-1]
	if n := a.recordTokens(); n >= 0 {
		if c.MaxLen > 0 && n > int64(c.MaxLen) {
			return exclude(ReasonMaxLen, "%d tokens (prompt %d + completion %d of the last turn), over --max-len %d",
				n, last.promptTokens, last.completionTokens, c.MaxLen), nil
		}
	} else if c.MaxLen > 0 {
		o.lenUnknown = true
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	id, head := unitHead(j.id, j.rec.Samples)
	err := enc.Encode(struct {
		ID            string          `json:"id"`
		Conversations []message       `json:"conversations"`
		Tools         json.RawMessage `json:"tools,omitempty"`
	}{id, msgs, p.tools})
	o.record = append(append(j.dst, head...), buf.Bytes()[1:]...)
	return o, err
}

// ids builds an ids record.
func (c *Config) ids(ctx context.Context, j *job, a answer, turnOf func(int) string) (outcome, error) {
	k := len(a.turns)
	for i, t := range a.turns {
		if t.outputIDs == nil {
			return exclude(ReasonNoOutputIDs, "%sthe answer has no output_ids (a chat or completions endpoint returns none); export it with --format conversations", turnOf(i)), nil
		}
	}
	last := a.turns[k-1]
	promptIDs := last.promptIDs
	if promptIDs == nil {
		ids, o, err := c.promptIDs(ctx, j, a, turnOf)
		switch {
		case err != nil:
			return outcome{}, err
		case o != nil:
			return *o, nil
		}
		promptIDs = ids
	}
	var o outcome
	var mask []bool // prompt positions that carry loss
	if a.conversation && k > 1 {
		ids, m, own, ex := earlierTurnsLoss(j, a, promptIDs, turnOf)
		if ex != nil {
			return *ex, nil
		}
		promptIDs, mask, o.ownTurns = ids, m, own
	}
	id, head := unitHead(j.id, j.rec.Samples)
	rec := append(j.dst, head...)
	rec = append(rec, `"id":`...)
	rec = appendString(rec, id)
	rec = append(rec, `,"input_ids":[`...)
	rec, np, ok := appendIDs(rec, promptIDs)
	if !ok {
		return exclude(ReasonBadAnswer, "%s: the prompt ids are not a list of token ids", j.where()), nil
	}
	if np > 0 {
		rec = append(rec, ',')
	}
	rec, no, ok := appendIDs(rec, last.outputIDs)
	if !ok {
		return exclude(ReasonBadAnswer, "%s: %soutput_ids is not a list of token ids", j.where(), turnOf(k-1)), nil
	}
	if np > 0 && no == 0 { // the comma before an empty output
		rec = rec[:len(rec)-1]
	}
	if c.MaxLen > 0 && np+no > c.MaxLen {
		return exclude(ReasonMaxLen, "%d input_ids (prompt %d + output %d), over --max-len %d", np+no, np, no, c.MaxLen), nil
	}
	rec = append(rec, `],"loss_mask":[`...)
	if mask == nil {
		rec = appendRun(rec, zeros, np)
	} else {
		for i := range np {
			if i > 0 {
				rec = append(rec, ',')
			}
			if mask[i] {
				rec = append(rec, '1')
			} else {
				rec = append(rec, '0')
			}
		}
	}
	if np > 0 && no > 0 {
		rec = append(rec, ',')
	}
	rec = appendRun(rec, ones, no)
	o.record = append(rec, "]}\n"...)
	return o, nil
}

// promptIDs returns the token ids of the prompt of a (whose answer lines
// do not hold them): the prompt line's input_ids, or its text or turns
// tokenized. When there are none, the outcome says what to do with the
// answer.
func (c *Config) promptIDs(ctx context.Context, j *job, a answer, turnOf func(int) string) ([]byte, *outcome, error) {
	k := len(a.turns)
	p, where, why, ok := j.prompt()
	if !ok {
		return nil, &outcome{left: true, why: why, note: where.String()}, nil
	}
	switch {
	case p.ids != nil && !a.conversation:
		return p.ids, nil, nil
	case p.ids != nil:
		return nil, excluded(ReasonBadAnswer, "%s: the answer has %d turns, its prompt (%s) is token ids", j.where(), k, where), nil
	case c.Tokenizer == nil:
		return nil, &outcome{left: true, why: leftNeedsServer}, nil
	default:
		var ids []int
		var err error
		switch {
		case p.text != nil:
			ids, err = c.Tokenizer.TokenizeText(ctx, *p.text)
		case a.steps():
			msgs, merr := p.toolMessages(a, func(i int) message {
				m := message{Role: "assistant", Content: a.turns[i].content()}
				m.ToolCalls, _ = ingest.ReadToolCalls(a.turns[i].toolCalls)
				return m
			})
			if merr != nil {
				return nil, excluded(ReasonBadAnswer, "%s: %v (its prompt: %s)", j.where(), merr, where), nil
			}
			ids, err = c.tokenizeChat(ctx, msgs[:len(msgs)-1], p.tools)
		case a.conversation:
			if u := p.userTurns(); u != k {
				return nil, excluded(ReasonBadAnswer, "%s: the answer has %d turns, its prompt (%s) %d user turns", j.where(), k, where, u), nil
			}
			for i := range a.turns[:k-1] {
				if !a.turns[i].hasText() {
					return nil, excluded(ReasonNoText, "%sthe answer has no text, which the prompt of the next turn holds; the prompt ids cannot be rebuilt", turnOf(i)), nil
				}
			}
			msgs := p.interleave(func(i int) message {
				if i < k-1 {
					return message{Role: "assistant", Content: a.turns[i].content()}
				}
				return message{}
			})
			ids, err = c.tokenizeChat(ctx, msgs[:len(msgs)-1], p.tools)
		default:
			ids, err = c.tokenizeChat(ctx, p.upToLastUser(), p.tools)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("tokenizing the prompt of %s (%s): %w", j.id, where, err)
		}
		b := make([]byte, 0, 8*len(ids)+2)
		b = append(b, '[')
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		return append(b, ']'), nil, nil
	}
}

// excluded is exclude, for a function that returns an *outcome.
func excluded(reason, format string, args ...any) *outcome {
	o := exclude(reason, format, args...)
	return &o
}

var zeros, ones = strings.Repeat("0,", 4096), strings.Repeat("1,", 4096)

// knownLines reads back what the index needs of records export wrote
// (data, whole lines of tokenized.jsonl): each line's id and the length
// of its input_ids, or store.Unknown for a conversations record. It reads
// only the layout ids and conversation both write ({"id":"...", then
// ,"input_ids":[...] or ,"conversations":), with no escape in the id; for
// anything else it returns false and the lines are parsed instead.
func knownLines(data []byte, dst []ingest.KnownLine) ([]ingest.KnownLine, bool) {
	const idKey, idsKey = `{"id":"`, `,"input_ids":[`
	dst = dst[:0]
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		line := data[:nl]
		data = data[nl+1:]
		if !bytes.HasPrefix(line, []byte(idKey)) {
			return dst, false
		}
		line = line[len(idKey):]
		q := bytes.IndexByte(line, '"')
		if q <= 0 || bytes.IndexByte(line[:q], '\\') >= 0 {
			return dst, false
		}
		k := ingest.KnownLine{ID: string(line[:q]), PromptTokens: store.Unknown}
		k.From, k.HasFrom = answerSumOf(line)
		switch line = line[q+1:]; {
		case bytes.HasPrefix(line, []byte(idsKey)):
			ids := line[len(idsKey):]
			end := bytes.IndexByte(ids, ']')
			if end < 0 {
				return dst, false
			}
			if k.PromptTokens = 0; end > 0 {
				k.PromptTokens = int64(bytes.Count(ids[:end], []byte{','})) + 1
			}
		case !bytes.HasPrefix(line, []byte(`,"conversations":`)):
			return dst, false
		}
		dst = append(dst, k)
	}
	return dst, true
}

// answerSumOf reads the answer_sum export puts last in a record it wrote
// (withAnswerSum).
func answerSumOf(line []byte) (uint32, bool) {
	const key = `,"` + ingest.AnswerSumKey + `":`
	n := len(key) + 10 + 1 // the key, "8 hex digits", }
	if len(line) < n || string(line[len(line)-n:len(line)-11]) != key || line[len(line)-1] != '}' {
		return 0, false
	}
	return ingest.ParseAnswerSum(line[len(line)-11 : len(line)-1])
}

// appendRun appends n copies of run's digit, comma-separated.
func appendRun(dst []byte, run string, n int) []byte {
	for n > 0 {
		k := min(n, len(run)/2)
		dst = append(dst, run[:2*k-1]...)
		n -= k
		if n > 0 {
			dst = append(dst, ',')
		}
	}
	return dst
}

// index returns the first position of sub in s, or -1 (Knuth-Morris-Pratt).
func index(s, sub []int) int {
	if len(sub) == 0 {
		return 0
	}
	fail := make([]int, len(sub))
	for i, k := 1, 0; i < len(sub); i++ {
		for k > 0 && sub[i] != sub[k] {
			k = fail[k-1]
		}
		if sub[i] == sub[k] {
			k++
		}
		fail[i] = k
	}
	for i, k := 0, 0; i < len(s); i++ {
		for k > 0 && s[i] != sub[k] {
			k = fail[k-1]
		}
		if s[i] == sub[k] {
			k++
		}
		if k == len(sub) {
			return i - k + 1
		}
	}
	return -1
}

// appendString appends s as a JSON string, HTML characters unescaped.
func appendString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// exclusionLine is an excluded.jsonl line (contract: id, reason, detail,
// excluded_at, then the answer_sum of the answer it excludes).
func exclusionLine(dst []byte, key string, samples uint32, reason, detail string, at time.Time, answer uint32) []byte {
	id, head := unitHead(key, samples)
	dst = append(dst, head...)
	dst = append(dst, `"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"reason":`...)
	dst = appendString(dst, reason)
	dst = append(dst, `,"detail":`...)
	dst = appendString(dst, detail)
	dst = append(dst, `,"excluded_at":"`...)
	dst = at.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	dst = ingest.AppendAnswerSum(append(dst, '"'), answer)
	return append(dst, "}\n"...)
}

// unitHead is the id a record or exclusion of the answer keyed key
// (store.UnitID) writes, and what its object begins with: `{` and, for
// a sample of a dataset of more than one (samples, the answer's
// store.Record.Samples), its "sample" and "samples", as gen writes them
// on the answer, so that the record is indexed under the answer's unit.
func unitHead(key string, samples uint32) (id, head string) {
	id, s := store.SplitUnit(key)
	if samples <= 1 && s == 0 {
		return id, "{"
	}
	return id, `{"sample":` + strconv.Itoa(s) + `,"samples":` + strconv.FormatUint(uint64(max(samples, uint32(s)+1)), 10) + `,`
}
