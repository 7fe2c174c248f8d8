package gen

// Conversations asked turn by turn (Config.Turns == TurnsAll, a chat
// prompt with k >= 2 user turns). The lines gen writes:
//
// turns.jsonl, one line per earlier turn i < k, written when turn i is
// answered: the answer line of raw_responses.jsonl with "turn" and "turns"
// after the id, and no "prompt_ids":
//
//	{"id":ID,"turn":i,"turns":k,"output_ids":[...],"text":...,...,"server":...}
//
// raw_responses.jsonl, one line per conversation, written with turn k:
//
//	{"id":ID,"turns":[T1,...,Tk],"prompt_tokens":Σ,"completion_tokens":Σ,
//	 "cached_tokens":Σ,"reasoning_tokens":Σ,"finish_reason":...,
//	 "finished_at":...,"server":...}
//
// Ti is turn i's answer object: its answer line without "id" (and, for
// i < k, the turn line without "id", "turn" and "turns"); Tk alone carries
// "prompt_ids" when gen computed them. A Σ key is left out when a turn
// lacks that count; finish_reason, finished_at and server are Tk's.
//
// Exactly once per turn: the index keys turn i's line ingest.TurnID(id, i).
// Feeding a conversation reads the turns the index holds from their lines
// at their stored offsets (checked against their sums), and the worker
// asks only the turns after them, in order.
//
// A conversation cut short (stopsAtCut: --export without
// --include-truncated): when turn i < k is cut at the token limit
// (finish_reason length) the conversation can no longer become a training
// record, so it ends there. Its raw line is written at once, in place of
// turn i's turn line, with turn i as its last answered turn and each turn
// after it, never asked, as {"asked":false}:
//
//	{"id":ID,"turns":[T1,...,Ti,{"asked":false},...],Σ over T1..Ti,
//	 "finish_reason":"length",... (Ti's)}
//
// Its exclusion ("length", "turn i of k: ...", as export decides it from
// this line) follows in the same flush, like any answer's. A turn i
// recorded cut in turns.jsonl (by a run without --export) ends the
// conversation the same way when a run with --export feeds it, without a
// request. The prompt then has its answer, so no later run asks its
// remaining turns, and an exclusion lost in a crash is made from the raw
// line by catchUp (exportrun.go), as for any answer.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// The values of Config.Turns.
const (
	// TurnsAll regenerates every assistant turn of a conversation of k >= 2
	// user turns, in order, in one request each: turn i sends the system
	// and user turns up to user turn i with the regenerated answers of
	// turns 1..i-1 between them; the original assistant turns are never
	// sent. Turns 1..k-1 are written to turns.jsonl, the conversation to
	// raw_responses.jsonl with turn k (the formats are above).
	TurnsAll = "all"
	// TurnsLast asks one request per prompt, the answer to its last user
	// turn, with the prompt's own assistant turns as context.
	TurnsLast = "last"
)

// conversations takes the conversations a run asks turn by turn (conv)
// and tool conversations asked step by step (toolConv, toolturns.go):
// the next request of each (its earlier turns, the model's calls paired
// with the data's results), the lines of its earlier turns and steps and
// its raw line; and, for the feeder, the turns and steps the index holds
// (recorded, recordedTools). Every request goes through the asker (ask),
// which hands it the jobs of conversations (talker); it never picks a
// server nor retries, and never writes a file: its lines go to the
// writer through the asker's results.
type conversations struct {
	ctl *control
	cfg *Config   // read only
	db  *store.DB // read only: the turns recorded
	ask *asker
	// stops counts the tool conversations stopped, by reason, for the
	// summary (progress.go).
	stops stopCounts

	// What it asks of the other parts, set by the run (newRun): a redone
	// answer's line marked, and whether a redo keeps a recorded turn
	// (redo.go).
	redoLine func(j *job, line []byte) []byte
	keepTurn func(ds *dsRun, t turnAnswer, keptRedo bool) bool
}

// conv is a conversation being asked turn by turn; only the worker that
// holds its job touches it.
type conv struct {
	k    int
	done []turnAnswer // turns 1..len(done), answered (recorded earlier or in this run)
	// counted reports whether the conversation is counted in its
	// dataset's halfDone.
	counted bool
	// cut reports that the conversation ends at its last done turn, which
	// was recorded cut (see stopsAtCut): nothing is left to ask.
	cut bool
}

// turnAnswer is one answered turn.
type turnAnswer struct {
	obj    []byte   // Ti: the answer object, without "id"
	text   string   // carried into the next turns
	counts [4]int64 // prompt, completion, cached and reasoning tokens, or store.Unknown
	// end holds a recorded turn's finish_reason, finished_at, server,
	// model and simulated, read from its line.
	end client.Result
	// redo marks a recorded turn asked again by a redo (its line's
	// "redo"), with the limit it was asked with (redoLimit, -1: none
	// written).
	redo      bool
	redoLimit int64
	redoTag   string // a redo of a list's tag (redolist.go)
}

// notAsked stands in a conversation line for a turn after the one it was
// cut at (see stopsAtCut); it counts nothing.
var notAsked = turnAnswer{obj: []byte(`{"asked":false}`)}

// stopsAtCut reports whether a conversation ends at a turn cut at the
// token limit: under --export without --include-truncated, where it could
// only be excluded as length, so its later turns would be asked for
// nothing.
func (cv *conversations) stopsAtCut() bool {
	return cv.cfg.Export != nil && !cv.cfg.Export.IncludeTruncated
}

// turnPrompt returns the prompt of the conversation's next turn.
func (c *conv) turnPrompt(p *Prompt) *Prompt {
	texts := make([]string, len(c.done))
	for i, t := range c.done {
		texts[i] = t.text
	}
	tp := *p
	tp.Messages = p.TurnMessages(len(c.done)+1, texts)
	return &tp
}

// answer takes j's conversation to its end, from its first turn (or
// step) not recorded: until its last is answered or one fails for good,
// or the run stops (the rest is left for the next run). A job the asker
// hands to a suspect's goroutine (worker.go) comes back here with the
// conversation's state, and goes on from the same turn.
func (cv *conversations) answer(j *job) {
	switch {
	case j.conv != nil && j.conv.cut:
		cv.endAtCut(j) // nothing to ask
	case j.tc != nil:
		cv.answerTools(j) // toolturns.go
	default:
		cv.answerTurns(j)
	}
}

// answerTurns asks j's conversation turn after turn (see answer).
func (cv *conversations) answerTurns(j *job) {
	for {
		res := cv.ask.ask(j, j.conv.turnPrompt(j.p))
		if res == nil {
			return
		}
		if !cv.turnAnswered(j, res) || cv.ctl.stopping() {
			return // the conversation is complete or failed; or left for the next run
		}
		j.tries = tries{suspect: j.suspect}
	}
}

// turnAnswered takes the answer to j's next turn: a turn line for an earlier
// turn (and true: the conversation goes on), the conversation's raw line
// for its last turn, or for an earlier one cut at the token limit when the
// conversation stops there (stopsAtCut). An earlier turn's answer without
// text cannot be carried into the next turn: the conversation gets an
// error line instead.
func (cv *conversations) turnAnswered(j *job, res *client.Result) bool {
	c := j.conv
	i := len(c.done) + 1
	cut := i < c.k && res.FinishReason == "length" && cv.stopsAtCut()
	if i < c.k && res.Text == nil && !cut {
		cv.ask.results <- cv.ask.jobError(j, 0, fmt.Sprintf("the answer has no text to carry into turn %d (a /generate server run with --skip-tokenizer-init, or a chat answer whose content is null); use a server that returns text", i+1), res.Server)
		return false
	}
	t := turnAnswer{counts: [4]int64{count(res.PromptTokens), count(res.CompletionTokens), count(res.CachedTokens), count(res.ReasoningTokens)}}
	if res.Text != nil {
		t.text = *res.Text
	}
	tokens := max(t.counts[1], 0)
	if i < c.k {
		res.PromptIDs = nil // the last turn's alone (see above)
	}
	if i < c.k && !cut {
		line := fmt.Appendf(make([]byte, 0, 256+8*len(res.OutputIDs)), `{"id":`)
		line = client.AppendJSONString(line, j.p.ID)
		line = fmt.Appendf(line, `,"turn":%d,"turns":%d,`, i, c.k)
		fields := len(line)
		line = res.AppendFields(line)
		t.obj = append([]byte{'{'}, line[fields:]...)
		t.obj = append(t.obj, '}')
		line = unitLine(j.p, append(line, "}\n"...))
		if j.redo {
			line = cv.redoLine(j, line)
		}
		opens := !c.counted
		c.counted = true
		c.done = append(c.done, t)
		cv.ask.results <- result{ds: j.ds, line: line, kind: turnLine, tokens: tokens, opens: opens}
		return true
	}
	t.obj = append([]byte{'{'}, res.AppendFields(nil)...)
	t.obj = append(t.obj, '}')
	all := append(c.done, t)
	cv.ask.results <- cv.conversationResult(j, all, res, tokens)
	return false
}

// endAtCut sends the raw line of j's conversation, which ends at its last
// recorded turn, cut (conv.cut): no request is made, and no token counted
// (the run that wrote the turn counted them).
func (cv *conversations) endAtCut(j *job) {
	c := j.conv
	cv.ask.results <- cv.conversationResult(j, c.done, &c.done[len(c.done)-1].end, 0)
}

// conversationResult is the raw line of j's conversation, whose answered
// turns are all (the others, after a cut, not asked), with last's
// finish_reason, finished_at, server and maker, and under --export its
// record or exclusion.
func (cv *conversations) conversationResult(j *job, all []turnAnswer, last *client.Result, tokens int64) result {
	turns := all
	if n := j.conv.k - len(all); n > 0 {
		turns = append(slices.Clip(all), slices.Repeat([]turnAnswer{notAsked}, n)...)
	}
	line := unitLine(j.p, conversationLine(j.p.ID, turns, last))
	if j.redo {
		line = cv.redoLine(j, line)
	}
	out := result{ds: j.ds, line: line, tokens: tokens, unknown: sum(all, 1) == store.Unknown, closes: j.conv.counted,
		redo: j.redo}
	out.truncated, out.ownLimit = j.cut(last.FinishReason)
	if !j.redo { // a redo's record comes in the final export pass (redo.go)
		decideExport(cv.ctl.reqs, cv.cfg.Export, &out, j.p)
	}
	return out
}

func count(n *int) int64 {
	if n == nil {
		return store.Unknown
	}
	return int64(*n)
}

// sum returns the sum of count c (an index into turnAnswer.counts) over
// turns, or store.Unknown when a turn lacks it.
func sum(turns []turnAnswer, c int) int64 {
	var s int64
	for _, t := range turns {
		if t.counts[c] == store.Unknown {
			return store.Unknown
		}
		s += t.counts[c]
	}
	return s
}

// conversationLine builds a conversation's raw_responses.jsonl line from its
// turns; last is the last turn's result.
func conversationLine(id string, turns []turnAnswer, last *client.Result) []byte {
	n := 256
	for _, t := range turns {
		n += len(t.obj) + 1
	}
	line := append(make([]byte, 0, n), `{"id":`...)
	line = client.AppendJSONString(line, id)
	line = append(line, `,"turns":[`...)
	for i, t := range turns {
		if i > 0 {
			line = append(line, ',')
		}
		line = append(line, t.obj...)
	}
	line = append(line, ']')
	for c, key := range []string{"prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens"} {
		if s := sum(turns, c); s != store.Unknown {
			line = fmt.Appendf(line, `,"%s":%d`, key, s)
		}
	}
	if last.FinishReason != "" {
		line = append(line, `,"finish_reason":`...)
		line = client.AppendJSONString(line, last.FinishReason)
	}
	if !last.FinishedAt.IsZero() {
		line = append(line, `,"finished_at":"`...)
		line = last.FinishedAt.UTC().AppendFormat(line, "2006-01-02T15:04:05.000Z07:00")
		line = append(line, '"')
	}
	if last.Server != "" {
		line = append(line, `,"server":`...)
		line = client.AppendJSONString(line, last.Server)
	}
	line = client.AppendMaker(line, last.Model, last.Simulated, last.Provenance)
	line = client.AppendMixValues(line, last.MixValues)
	return append(line, "}\n"...)
}

// turnFiles reads turn lines at their stored offsets, keeping the files it
// opened; only the feeder uses it.
type turnFiles map[uint32]*os.File

func (tf turnFiles) close() {
	for _, f := range tf {
		f.Close()
	}
}

// recorded returns the state of p's conversation: the turns the index holds
// (TurnID(id, 1), 2, ... up to the first one missing), read from their
// lines. An error says which line is wrong and what to do; the conversation
// cannot go on from it (the state returned then only says whether it is
// counted as half done).
func (cv *conversations) recorded(ds *dsRun, p *Prompt, files turnFiles, redo bool) (*conv, error) {
	c := &conv{k: p.Turns}
	type at struct {
		rec  store.Record
		path string
	}
	var found []at
	if err := cv.db.View(func(v *store.View) error {
		for i := 1; i < c.k; i++ {
			rec, ok, err := v.Get(ds.Name, store.Turns, ingest.TurnID(p.unitKey(), i))
			if err != nil || !ok {
				return err
			}
			path, ok := v.FilePath(rec.File)
			if !ok {
				return fmt.Errorf("turn %d of %s: its file (id %d) is no longer in the index; run 'gendex ingest' on the dataset", i, p.ID, rec.File)
			}
			found = append(found, at{rec, path})
		}
		return nil
	}); err != nil {
		return c, err
	}
	// A redone conversation has its answer: it was not counted as half
	// done (countHalfDone), and is only while its new turns come.
	c.counted = len(found) > 0 && !redo
	keptRedo := false
	for i, a := range found {
		t, err := readTurn(files, a.rec, a.path, i+1, c.k)
		if err != nil {
			return c, err
		}
		if redo && !cv.keepTurn(ds, t, keptRedo) {
			break // asked again from this turn on (redo.go)
		}
		keptRedo = keptRedo || t.redo
		c.done = append(c.done, t)
		if t.end.FinishReason == "length" && cv.stopsAtCut() {
			c.cut = true // the conversation ends here (see above)
			break
		}
	}
	return c, nil
}

// readTurn reads turn i of a k-turn conversation from its line in path.
func readTurn(files turnFiles, rec store.Record, path string, i, k int) (turnAnswer, error) {
	line, where, err := readTurnLine(files, rec, path, i)
	if err != nil {
		return turnAnswer{}, err
	}
	var l turnFields
	t, err := l.read(line, where, i)
	switch {
	case err != nil:
		return t, err
	case l.Turns != k:
		return t, fmt.Errorf("%s holds turn %d of a conversation of %d turns, but the prompt has %d user turns now (was the prompt changed? move turns.jsonl away to start the conversation over)", where, i, l.Turns, k)
	case l.Text == nil:
		return t, fmt.Errorf("%s: turn %d has no \"text\" to carry into turn %d", where, i, i+1)
	}
	return t, nil
}

// readTurnLine reads the line of turn i (rec, in path), checked against
// its stored sum; where is its path:line.
func readTurnLine(files turnFiles, rec store.Record, path string, i int) (line []byte, where string, err error) {
	f := files[rec.File]
	if f == nil {
		if f, err = os.Open(path); err != nil {
			return nil, "", fmt.Errorf("reading turn %d: %w", i, err)
		}
		files[rec.File] = f
	}
	where = fmt.Sprintf("%s:%d", path, rec.Line)
	line = make([]byte, rec.Length)
	n, _ := f.ReadAt(line, rec.Offset)
	if n < len(line) || store.LineSum(line) != rec.Sum {
		return nil, where, fmt.Errorf("%s no longer holds turn %d as indexed (the file changed since; gendex ingest --reread %s reads it again)", where, i, ingest.ShellQuote(path))
	}
	return line, where, nil
}

// turnFields are the members of a turn line gen reads back (a tool
// conversation's step adds its calls, user turn and results).
type turnFields struct {
	Turn             int               `json:"turn"`
	Turns            int               `json:"turns"`
	Text             *string           `json:"text"`
	ToolCalls        []client.ToolCall `json:"tool_calls"`
	UserTurn         *int              `json:"user_turn"`
	Results          []int             `json:"results"`
	PromptTokens     *int64            `json:"prompt_tokens"`
	CompletionTokens *int64            `json:"completion_tokens"`
	CachedTokens     *int64            `json:"cached_tokens"`
	ReasoningTokens  *int64            `json:"reasoning_tokens"`
	FinishReason     string            `json:"finish_reason"`
	FinishedAt       string            `json:"finished_at"`
	Server           string            `json:"server"`
	Model            string            `json:"model"`
	Simulated        bool              `json:"simulated"`
	Provenance       json.RawMessage   `json:"provenance"`
	MixValues        json.RawMessage   `json:"mix_values"`
	Redo             bool              `json:"redo"`
	MaxNewTokens     *int64            `json:"max_new_tokens"`
	RedoTag          string            `json:"redo_tag"`
}

// read reads turn i's line (at where) into l, and returns the turn it
// holds.
func (l *turnFields) read(line []byte, where string, i int) (turnAnswer, error) {
	var t turnAnswer
	if err := json.Unmarshal(line, l); err != nil {
		return t, fmt.Errorf("%s: turn %d: %v", where, i, err)
	}
	if l.Text != nil {
		t.text = *l.Text
	}
	t.end.FinishReason, t.end.Server, t.end.Model, t.end.Simulated, t.end.Provenance = l.FinishReason, l.Server, l.Model, l.Simulated, l.Provenance
	t.end.MixValues = l.MixValues
	t.redo, t.redoLimit, t.redoTag = l.Redo, -1, l.RedoTag
	if l.MaxNewTokens != nil {
		t.redoLimit = *l.MaxNewTokens
	}
	t.end.FinishedAt, _ = time.Parse(time.RFC3339Nano, l.FinishedAt)
	for c, n := range [4]*int64{l.PromptTokens, l.CompletionTokens, l.CachedTokens, l.ReasoningTokens} {
		t.counts[c] = store.Unknown
		if n != nil && *n >= 0 {
			t.counts[c] = *n
		}
	}
	obj, err := objectWithout(line, "id", "turn", "turns", "redo", "max_new_tokens", "redo_tag")
	if err != nil {
		return t, fmt.Errorf("%s: turn %d: %v", where, i, err)
	}
	t.obj = obj
	return t, nil
}

// objectWithout returns the JSON object line without the given top-level
// keys; every other member is kept as written, in its order.
func objectWithout(line []byte, drop ...string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	out := []byte{'{'}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if slices.Contains(drop, key) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = client.AppendJSONString(out, key)
		out = append(out, ':')
		out = append(out, val...)
	}
	return append(out, '}'), nil
}

// countHalfDone counts a dataset's conversations with a first turn in the
// index but neither a raw record nor (unless RetryErrors) an error.
func (cv *conversations) countHalfDone(v *store.View, name string) (int64, error) {
	var n int64
	err := v.Each(name, store.Turns, func(rec *store.Record) error {
		id, ok := strings.CutSuffix(rec.ID, "#1")
		if !ok {
			return nil
		}
		if _, done, _ := v.Get(name, store.Raw, id); done {
			return nil
		}
		if _, failed, _ := v.Get(name, store.Errors, id); failed && !cv.cfg.RetryErrors {
			return nil
		}
		n++
		return nil
	})
	return n, err
}
