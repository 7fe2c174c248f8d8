package ingest

// Indexing what a file's only writer (export) has just written, from the
// bytes in memory instead of reading them back: IndexWritten, and
// ParseWritten to parse one write while the one before is indexed.

import (
	"bytes"
	"context"

	"gendex/store"
)

// written is what a file's only writer has just written to it: data,
// whole lines, at offset at; parsed, if not nil, is them parsed ahead.
type written struct {
	data   []byte
	at     int64
	parsed *Parsed
}

// Parsed is the lines of a write parsed ahead of their indexing (see
// ParseWritten), their line numbers counted from the write's first line.
type Parsed struct {
	src     Source
	at, end int64
	idPath  string
	chunks  []*chunk
}

// ParseWritten parses data, whole lines that a writer writes at offset at
// of src.Path, as IndexWritten would, so that the parsing of one write can
// go on while the one before is indexed; it may be called from any
// goroutine. IndexWritten uses the result only when it indexes exactly
// those bytes under the same id path; else it parses them again. Lines of
// prompt files are not parsed ahead (the id given to one without an id
// holds its line number): it returns nil for them.
func (ix *Indexer) ParseWritten(src Source, data []byte, at int64) *Parsed {
	if src.Stage == store.Prompts || len(data) == 0 || data[len(data)-1] != '\n' {
		return nil
	}
	idPath := src.IDPath
	if idPath == "" && !src.BuiltinIDs { // the one the index remembers for the file, if any
		err := ix.DB.View(func(v *store.View) error {
			st, ok, err := v.File(src.Path)
			if ok {
				idPath = st.IDPath
			}
			return err
		})
		if err != nil {
			return nil
		}
	}
	ip, err := ParseIDPath(idPath)
	if err != nil {
		return nil
	}
	p := &Parsed{src: src, at: at, end: at + int64(len(data)), idPath: idPath}
	maxRecords, maxBytes := ix.limits()
	out, free, stop := make(chan *chunk), make(chan *chunk, 1), make(chan struct{})
	defer close(stop)
	free <- chunks.Get().(*chunk)
	go parseFile(context.Background(), memLineReader(data, at, -1), src, ip, 0, maxRecords, maxBytes, out, free, stop)
	for c := range out {
		if c.err != nil {
			return nil
		}
		p.chunks = append(p.chunks, c)
		if !c.last {
			free <- chunks.Get().(*chunk)
		}
	}
	return p
}

// limits are the records and bytes committed at most in one transaction.
func (ix *Indexer) limits() (maxRecords int, maxBytes int64) {
	maxRecords, maxBytes = ix.BatchRecords, ix.BatchBytes
	if maxRecords <= 0 {
		maxRecords = 32_768
	}
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	return maxRecords, maxBytes
}

// IndexWritten is IndexFile for a writer that has just appended data, one
// or more whole lines, at offset at of src.Path, and holds the file
// against other writers (export's outputs): when the index has read the
// file exactly up to at, the new lines are indexed from data instead of
// being read back from the file, with the same records, counters and file
// state. In any other case (a file the index does not know yet, one it
// must forget, or other bytes before at not yet indexed) it is IndexFile.
// parsed, when not nil, is ParseWritten's result for data (see there).
func (ix *Indexer) IndexWritten(ctx context.Context, src Source, data []byte, at int64, parsed *Parsed) (FileResult, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return ix.indexFile(ctx, src, nil)
	}
	return ix.indexFile(ctx, src, &written{data: data, at: at, parsed: parsed})
}

// usable returns the lines parsed ahead if they are of w's bytes.
func (w *written) usable() *Parsed {
	if w == nil || w.parsed == nil || w.parsed.at != w.at || w.parsed.end != w.at+int64(len(w.data)) {
		return nil
	}
	return w.parsed
}

// KnownLine is what a writer knows one of its lines normalizes to: its id
// and its prompt count (store.Unknown when it has none). See KnownWritten.
type KnownLine struct {
	ID           string
	PromptTokens int64
	// From is the line's answer_sum, when HasFrom (answersum.go).
	From    uint32
	HasFrom bool
}

// KnownWritten is ParseWritten for a writer that made the lines of data
// itself and knows, for each, what Normalize reads from it: known[i] is
// line i's id and prompt count (export's tokenized.jsonl, whose records it
// lays out: the id and the length of input_ids). It is for the tokenized
// stage only, and for a file read by the default id rules; otherwise, or
// when known has not one entry per line, or a record the store refuses,
// it returns nil (ParseWritten does the work, and reports). The records are those Normalize would make; tests hold
// the writers to that.
func (ix *Indexer) KnownWritten(src Source, data []byte, at int64, known []KnownLine) *Parsed {
	if src.Stage != store.Tokenized || src.IDPath != "" || len(data) == 0 || data[len(data)-1] != '\n' {
		return nil
	}
	custom := false
	if err := ix.DB.View(func(v *store.View) error {
		st, ok, err := v.File(src.Path)
		custom = ok && st.IDPath != ""
		return err
	}); err != nil || custom {
		return nil
	}
	if bytes.Count(data, newline) != len(known) {
		return nil
	}
	maxRecords, maxBytes := ix.limits()
	p := &Parsed{src: src, at: at, end: at + int64(len(data))}
	c := chunks.Get().(*chunk).reset()
	var size, lines int64
	off := at
	for rest := data; len(rest) > 0; {
		nl := bytes.IndexByte(rest, '\n')
		line := rest[:nl]
		k := known[lines]
		lines++
		c.recs = append(c.recs, pending{stage: store.Tokenized, rec: store.Record{
			ID: k.ID, Shape: store.ShapeTokenized, Offset: off, Length: int64(len(line)), Line: lines, Sum: store.LineSum(line),
			PromptTokens: k.PromptTokens, CompletionTokens: store.Unknown, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
			From: k.From, HasFrom: k.HasFrom,
		}})
		if clipCounts(&c.recs[len(c.recs)-1].rec) != "" || store.CheckRecord(&c.recs[len(c.recs)-1].rec) != nil {
			return nil // a line the parser reports on
		}
		off += int64(nl) + 1
		size += int64(nl) + 1
		rest = rest[nl+1:]
		if len(c.recs) >= maxRecords || size >= maxBytes || len(rest) == 0 {
			c.off, c.lines, c.last = off, lines, len(rest) == 0
			p.chunks = append(p.chunks, c)
			if !c.last {
				c, size = chunks.Get().(*chunk).reset(), 0
			}
		}
	}
	return p
}
