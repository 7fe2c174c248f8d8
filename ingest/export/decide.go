package export

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"gendex/ingest"
	"gendex/store"
)

// Decision is what becomes of one answer decided in memory (DecideLine).
type Decision struct {
	// Line is the line to append, newline included: to tokenized.jsonl,
	// or to excluded.jsonl when Reason is set. It is nil when the answer
	// is left.
	Line []byte
	// Reason is the exclusion's reason (one of Reasons); "" for a record.
	Reason string
	// Left says why the answer gets neither for now; "" otherwise. A
	// later `gendex export` decides it again from the files.
	Left string
	// OwnTurns counts the earlier turns the server rendered otherwise than
	// the model generated them, whose own ids the record holds in their
	// place (turnloss.go).
	OwnTurns int
}

// DecideLine decides one answer held in memory, as Export decides it from
// the files, so that gen --export and a later export write the same
// records: answer is the answer line to prompt id (as written to
// answerPath), prompt the prompt's line, read from promptPath:promptLine
// (nil when there is none). It returns an error only for what stops a run:
// a tokenizer failure.
func (c *Config) DecideLine(ctx context.Context, id string, answer []byte, answerPath string, prompt []byte, promptPath string, promptLine int64) (Decision, error) {
	e := entry{id: id, prompt: store.Record{ID: id, Line: promptLine}, hasPrompt: prompt != nil}
	// One read of the line gives its record (as Normalize reads it) and
	// its answer: gen's own lines are read by the table's short row.
	a, recErr, err := ingest.ReadAnswerRecord(answer, nil, &e.rec)
	if recErr != nil {
		e.rec = store.Record{PromptTokens: store.Unknown, CompletionTokens: store.Unknown}
	}
	e.rec.Sum = store.LineSum(bytes.TrimSuffix(answer, []byte("\n"))) // as the index sums the line: its record names it
	pre := &a
	if err != nil { // parseAnswer reads the line again and names what is wrong
		pre = nil
	}
	read := func(r *store.Record) ([]byte, string, error) {
		if r == &e.prompt {
			return prompt, promptPath, nil
		}
		return answer, answerPath, nil
	}
	o, err := c.decide(ctx, &job{id: id, rec: &e.rec, line: answer, path: answerPath, entry: &e, read: read, pre: pre})
	if err != nil {
		return Decision{}, err
	}
	switch {
	case o.left:
		return Decision{Left: o.leftText()}, nil
	case o.record != nil:
		return Decision{Line: o.record, OwnTurns: o.ownTurns}, nil
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	return Decision{Line: exclusionLine(nil, id, e.rec.Samples, o.reason, o.detail, now(), e.rec.Sum), Reason: o.reason}, nil
}

// leftText says why an answer is left.
func (o *outcome) leftText() string {
	switch o.why {
	case leftNoPrompt:
		return "its prompt is not in the index"
	case leftNeedsServer:
		return "its prompt ids are needed and no server tokenized them: gendex export --server URL makes its record"
	}
	return "its prompt line is not a prompt: " + o.note
}

// String is the format's --format name.
func (f Format) String() string {
	if f == IDs {
		return "ids"
	}
	return "conversations"
}

// CheckFormat returns an error when the records file at path (one
// dataset's tokenized.jsonl) already holds records of a format other than
// f: one file, and one index, hold one record per answer, in one format.
// A missing or empty file is fine.
func CheckFormat(path string, f Format) error {
	have, ok, err := FileFormat(path)
	if err != nil || !ok || have == f {
		return err
	}
	return fmt.Errorf("%s holds %s records; %s records would mix two formats in one file (each answer has one record per index): write the other format into a folder of its own, with an index of its own (gendex --db DIR/gendex.db export --format %s --out DIR ROOT|DATASET_DIR...)", path, have, f, f)
}

// FileFormat returns the format of the records file at path, from its
// first line; ok is false when the file is missing or empty, or its first
// line is no record (the index reports that line).
func FileFormat(path string) (f Format, ok bool, err error) {
	file, err := os.Open(path)
	if os.IsNotExist(err) {
		return f, false, nil
	}
	if err != nil {
		return f, false, err
	}
	defer file.Close()
	first, err := bufio.NewReaderSize(file, 64<<10).ReadBytes('\n')
	if len(first) == 0 || (err != nil && err != io.EOF) {
		return f, false, nil
	}
	var o [2][]byte
	if getFields(first, []string{"input_ids", "conversations"}, o[:]) != nil {
		return f, false, nil
	}
	switch {
	case !isNull(o[0]):
		return IDs, true, nil
	case !isNull(o[1]):
		return Conversations, true, nil
	}
	return f, false, nil
}
