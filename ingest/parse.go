package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"gendex/store"
)

type pending struct {
	rec   store.Record
	stage store.Stage
	chunk bool // a stream chunk: merged with the file's earlier chunks of its id
	redo  bool // an answer (or a turn) that replaces the earlier one of its id ("redo": true)
	maker int  // the answer's maker in the chunk's makers, counted from 1 (0: none)
}

var newline = []byte{'\n'}

// chunk is one batch of parsed lines, committed in one transaction.
// chunks recycles the parsed batches between IndexFile calls, so that a
// writer indexing a few KiB many times a second does not grow new ones.
var chunks = sync.Pool{New: func() any { return new(chunk) }}

type chunk struct {
	recs     []pending
	problems []Problem
	makers   makers // the answer lines' makers (a response file's)
	off      int64  // end of the last complete line in the chunk
	lines    int64  // lines before off
	last     bool   // no chunk follows: the file's end (eof), or ctx was done
	eof      bool   // the file was read to its end: torn is set
	torn     int
	err      error
}

// reset empties c for another batch, keeping its memory.
func (c *chunk) reset() *chunk {
	c.recs, c.problems, c.last, c.eof, c.torn, c.err = c.recs[:0], c.problems[:0], false, false, 0, nil
	c.makers.reset()
	return c
}

// parseFile reads complete lines from lr (lines before them) and sends
// them, parsed, in chunks; the last chunk has last set (or err). It stops
// early when ctx is done (sending what it has as the last chunk) or stop
// is closed. It releases lr.
func parseFile(ctx context.Context, lr *lineReader, src Source, idPath IDPath, lines int64, maxRecords int, maxBytes int64,
	out chan<- *chunk, free <-chan *chunk, stop <-chan struct{}) {
	defer close(out)
	var warned onceARead
	defer lr.release()
	// Lines in memory are counted first, so a batch does not grow its
	// records one doubling at a time.
	want := 0
	if lr.r == nil {
		want = min(bytes.Count(lr.mem, newline), maxRecords)
	}
	var c *chunk
	var size int64
	next := func() bool {
		select {
		case c = <-free:
			c.reset()
			if cap(c.recs) < want {
				c.recs = make([]pending, 0, want)
			}
			size = 0
			return true
		case <-stop:
			return false
		}
	}
	send := func() bool {
		c.off, c.lines = lr.off, lines
		select {
		case out <- c:
			return true
		case <-stop:
			return false
		}
	}
	if !next() {
		return
	}
	for {
		line, start, err := lr.next()
		if errors.Is(err, io.EOF) {
			c.last, c.eof, c.torn = true, lr.eof, lr.torn
			send()
			return
		}
		if err != nil {
			c.err = err
			send()
			return
		}
		lines++
		size += int64(len(line)) + 1
		if !isBlank(line) {
			c.add(src, idPath, line, start, lines, &warned)
		}
		if len(c.recs) >= maxRecords || size >= maxBytes {
			if ctx.Err() != nil {
				c.last, c.torn = true, 0
				send()
				return
			}
			if !send() || !next() {
				return
			}
		}
	}
}

// onceARead says which of the warnings given once a read of a file were.
type onceARead struct {
	id     bool // its answers are indexed under an id no prompt carries
	counts bool // a line's counts do not add up to the total it states
}

// add parses one line into the chunk, or records why it cannot be indexed.
// The first line indexed under a server's request id (or its file and
// line) is reported, and the first whose counts do not add up (warned
// says which were).
func (c *chunk) add(src Source, idPath IDPath, line []byte, start, lineNo int64, warned *onceARead) {
	c.recs = append(c.recs, pending{})
	p := &c.recs[len(c.recs)-1]
	p.rec = store.Record{Offset: start, Length: int64(len(line)), Line: lineNo, Sum: store.LineSum(line)}
	stage, info, err := normalize(line, src.Stage, idPath, &p.rec)
	if err != nil && stage == store.Prompts && errors.Is(err, ErrNoID) {
		p.rec.ID = LineID(src.Path, lineNo)
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: LineIDGiven,
			Msg: fmt.Sprintf("prompt has no id; it is known as %q (stable while the file's lines stay in place)", p.rec.ID)})
		err = nil
	}
	if err == nil && info.partial && info.lineID {
		// A stream's event before its last, with no id to merge it by:
		// the last event holds the stream's counts and is its record.
		c.recs = c.recs[:len(c.recs)-1]
		return
	}
	if err == nil && info.lineID {
		p.rec.ID = LineID(src.Path, lineNo)
	}
	if err != nil {
		c.recs = c.recs[:len(c.recs)-1]
		kind := Invalid
		if errors.Is(err, ErrNoID) {
			kind = NoID
		}
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: kind, Msg: describe(err) + "; line skipped"})
		return
	}
	p.stage, p.chunk = stage, info.chunk && stage == store.Raw
	p.redo = info.redo && (stage == store.Raw || stage == store.Turns) && !p.chunk
	if stage == store.Raw && src.Stage == store.Raw {
		p.maker = c.makers.add(info.model, info.simulated, info.provenance)
	}
	over := clipCounts(&p.rec)
	if err := store.CheckRecord(&p.rec); err != nil {
		c.recs = c.recs[:len(c.recs)-1]
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: Unstorable, Msg: err.Error() + "; line skipped"})
		return
	}
	switch {
	case warned.id:
	case info.serverID != "":
		warned.id = true
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: ServerID,
			Msg: fmt.Sprintf("no id or custom_id: indexed under the server's request id (%s), and so are the file's other such lines; no prompt carries it, so these answers cannot be matched to prompts (give --id PATH if the lines keep the prompt's id elsewhere)", info.serverID)})
	case info.lineID && stage == store.Raw:
		warned.id = true
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: ServerID, Msg: lineIDNote(info, p.rec.ID)})
	}
	if info.countsOff != "" && !warned.counts {
		warned.counts = true
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: BadCount,
			Msg: info.countsOff + "; indexed with its counts unknown, as is every other line of the file whose counts do not add up"})
	}
	// A stream chunk's counts may come with a later chunk: the commit
	// counts its record as unknown or not once merged.
	switch {
	case info.countsOff != "": // said above, once a read
	case stage == store.Raw && p.rec.CompletionTokens < 0 && !p.chunk && over != "":
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: NoTokens,
			Msg: over + "; indexed with its completion count unknown"})
	case stage == store.Raw && p.rec.CompletionTokens < 0 && !p.chunk && idPath.fields() && idPath.paths[mCompletion] != nil:
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: NoTokens,
			Msg: fmt.Sprintf("no token count at %s (--field completion_tokens); indexed as unknown", strings.Join(idPath.paths[mCompletion], "."))})
	case stage == store.Raw && p.rec.CompletionTokens < 0 && !p.chunk && info.other:
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: NoTokens,
			Msg: fmt.Sprintf("no token count where a %s line keeps it (%s); indexed as unknown", forms[info.form].name, forms[info.form].counts)})
	case stage == store.Raw && p.rec.CompletionTokens < 0 && !p.chunk:
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: NoTokens,
			Msg: "no token count (looked for completion_tokens, meta_info.completion_tokens, usage.completion_tokens or output_tokens, a choice's usage, response.body.usage, response.usage, output_ids); indexed as unknown"})
	case over != "":
		c.problems = append(c.problems, Problem{Path: src.Path, Line: lineNo, Kind: BadCount, Msg: over + "; indexed with that count unknown"})
	}
}

// clipCounts makes every count of r above store.MaxTokens unknown (no
// answer holds that many tokens: it is not a count, like 1e30, which the
// normalizer already leaves unknown) and says which, or returns "".
func clipCounts(r *store.Record) string {
	msg := ""
	for _, c := range [...]struct {
		name string
		v    *int64
	}{{"completion_tokens", &r.CompletionTokens}, {"prompt_tokens", &r.PromptTokens},
		{"cached_tokens", &r.CachedTokens}, {"reasoning_tokens", &r.ReasoningTokens}} {
		if *c.v > store.MaxTokens {
			if msg == "" {
				msg = fmt.Sprintf("%s %d is more than any answer holds (the limit is %d)", c.name, *c.v, int64(store.MaxTokens))
			}
			*c.v = store.Unknown
		}
	}
	if r.CompletionTokens < 0 && r.Shape == store.ShapeFlat {
		r.Shape = store.ShapeUnknown // as for a flat line with no count
	}
	return msg
}

// unknownOf is 1 for a record without a completion count, else 0.
func unknownOf(r *store.Record) int64 {
	if r.CompletionTokens < 0 {
		return 1
	}
	return 0
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

// makers counts a batch's answer lines by their raw "model" value and
// "simulated" flag; most batches have one maker, so a line costs one
// comparison.
type makers struct {
	raw   [][]byte // each maker's "model" value as written (nil: none)
	sim   []bool
	prov  [][]byte // each maker's "provenance" object as written (nil: none)
	lines []uint64
}

func (m *makers) reset() {
	m.raw, m.sim, m.prov, m.lines = m.raw[:0], m.sim[:0], m.prov[:0], m.lines[:0]
}

// add counts a line of a maker and returns the maker's place in the
// batch's, counted from 1.
func (m *makers) add(model []byte, simulated bool, prov []byte) int {
	for i := len(m.raw) - 1; i >= 0; i-- {
		if m.sim[i] == simulated && bytes.Equal(m.raw[i], model) && (m.raw[i] == nil) == (model == nil) && bytes.Equal(m.prov[i], prov) {
			m.lines[i]++
			return i + 1
		}
	}
	m.raw = append(m.raw, bytes.Clone(model))
	m.sim = append(m.sim, simulated)
	m.prov = append(m.prov, bytes.Clone(prov))
	m.lines = append(m.lines, 1)
	return len(m.raw)
}

// addTo adds the batch's counts to a file's makers, and says where each
// of the batch's makers is among them (at[i] for the batch's i+1, counted
// from 1 as store.Record.Maker is).
func (m *makers) addTo(ms []store.Maker, at []uint32) ([]store.Maker, []uint32) {
	at = at[:0]
	for i, raw := range m.raw {
		model := ""
		if len(raw) > 0 && raw[0] == '"' {
			model, _ = decodeString(raw)
		}
		prov := provenanceOf(m.prov[i])
		ms = store.AddMaker(ms, model, m.sim[i], prov, m.lines[i])
		for j := range ms {
			if ms[j].Model == model && ms[j].Simulated == m.sim[i] && bytes.Equal(ms[j].Provenance, prov) {
				at = append(at, uint32(j+1))
				break
			}
		}
	}
	return ms, at
}

// provenanceOf is a line's "provenance" value as a Maker keeps it: a JSON
// object, compacted; anything else (absent, null, not an object) is none.
func provenanceOf(raw []byte) json.RawMessage {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// lineIDNote is the warning for a file whose answers have no id: they are
// known by their file and line, which no prompt carries.
func lineIDNote(info lineInfo, id string) string {
	how := "give --id PATH (or --field id=PATH) if the lines keep the prompt's id somewhere"
	f := info.form
	switch {
	case info.emptyID:
		how = `their "id" is empty, as some servers write it (Hugging Face TGI's chat route does); write the prompt's id beside each answer and give --id PATH`
	case f == fVertex:
		how = "Vertex AI writes no request id and not in the order of the requests; a label of your own in each request (request.labels.KEY) is one: give --id request.labels.KEY"
	case f == fOllama, f == fLlamaCpp, f == fTGI, f == fMindIE, f == fGemini:
		how = "the answers of " + forms[f].name + " carry no request id; write the prompt's id beside each answer and give --id PATH"
	}
	return fmt.Sprintf("no id: this answer is indexed as %q, its file and line, and so are the file's other answers without one; its tokens, finish reason and time count, but no prompt carries that id, so these answers cannot be matched to prompts (%s)", id, how)
}
