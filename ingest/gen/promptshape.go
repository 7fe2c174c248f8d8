package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"gendex/ingest"
	"gendex/store"
)

// Where a prompt line keeps its prompt and id, and what gen says of a set
// it cannot send. Before the index is touched, every line of each
// dataset's prompts files is read for its shape (scanPrompts): token ids,
// text, chat messages, conversations, or none gen can send (no prompt
// key, or more than one); a --id or --prompt path that matches no line of
// a dataset stops the run there (ErrPromptPath). Once the index is level,
// a dataset with prompts to answer whose lines are of more than one shape,
// or of none gen sends, is said with the keys its lines have and the
// flags that read them (sayShapes); a run whose prompts to answer are all
// unsendable stops before the first request. The feeder counts each such
// prompt as not sent for its shape: no errors.jsonl line, so it stays to
// go (neither answered nor failed, as progress and check count it) and a
// run with the right flags sends it; a run that leaves some, or sent
// nothing while prompts are missing, ends in an error (leftUnsent).

// PromptPaths say where the lines of the prompts files keep their id and
// their prompt when gen's keys do not hold them (gen --id, --prompt):
// dotted paths as ingest --id takes them ("meta.uid", "data.0.text").
type PromptPaths struct {
	// ID is the id's: the prompts files are indexed under it, and the
	// index remembers it for them (ingest.Source.IDPath).
	ID string
	// Prompt is the prompt's: text (a string), chat messages (a list of
	// {"role","content"}), ShareGPT conversations (a list of
	// {"from","value"}) or token ids (a list of integers).
	Prompt string
}

// ErrPromptPath is a --id or --prompt path that matches no line of a
// dataset (a usage mistake: nothing was sent or indexed).
var ErrPromptPath = errors.New("a --id or --prompt path matches no line")

type pathError struct{ msg string }

func (e *pathError) Error() string        { return e.msg }
func (e *pathError) Is(target error) bool { return target == ErrPromptPath }

var (
	errNoPrompt    = errors.New("prompt has none of input_ids, text, messages or conversations")
	errManyPrompts = errors.New("prompt has more than one of input_ids, text, messages and conversations")
)

// noPromptAt is errNoPrompt when --prompt names the path.
type noPromptAt struct{ path string }

func (e noPromptAt) Error() string {
	return "no text, chat messages, conversations or token ids at " + e.path + " (the --prompt path)"
}
func (noPromptAt) Is(target error) bool { return target == errNoPrompt }

// lineShape is what a prompt line holds, as gen reads it.
type lineShape uint8

const (
	lineIDs lineShape = iota
	lineText
	lineMessages
	lineConvos
	lineNone // no prompt gen reads: none of its keys, or nothing at --prompt
	lineMany // more than one of input_ids, text, messages and conversations
	lineBad  // not a JSON object: the index reports it, nothing is sent
	numLineShapes
)

var lineShapeNames = [numLineShapes]string{"token ids", "text", "chat messages", "conversations",
	"with no prompt gen reads", "with more than one prompt key", "not a JSON object"}

// routeShape is the route shape (preflight) of a sendable line shape.
var routeShape = [...]shape{lineIDs: shapeIDs, lineText: shapeText, lineMessages: shapeChat, lineConvos: shapeChat}

// classify returns the shape of a prompt line: by gen's keys (input_ids,
// text, messages, conversations), or by the value at path.
func classify(line []byte, path []string) lineShape {
	if path != nil {
		v, err := valueAt(line, path)
		switch {
		case err != nil:
			return lineBad
		case v == nil:
			return lineNone
		}
		return valueShape(v)
	}
	if isIDsPrompt(line) {
		return lineIDs
	}
	var seen uint8
	err := ingest.EachField(line, func(key, val []byte) {
		if string(val) == "null" {
			return
		}
		switch string(key) {
		case "input_ids":
			seen |= 1 << lineIDs
		case "text":
			seen |= 1 << lineText
		case "messages":
			seen |= 1 << lineMessages
		case "conversations":
			seen |= 1 << lineConvos
		}
	})
	switch {
	case err != nil:
		return lineBad
	case seen == 0:
		return lineNone
	case seen&(seen-1) != 0:
		return lineMany
	}
	sh := lineIDs
	for seen>>sh != 1 {
		sh++
	}
	return sh
}

// valueAt returns the value at path in the JSON object line (nil when
// there is none, or it is null): an object's key, or for a key of digits
// an array's element. err says line is no JSON object.
func valueAt(line []byte, path []string) ([]byte, error) {
	v := bytes.TrimSpace(line)
	if len(v) == 0 || v[0] != '{' {
		return nil, ingest.ErrNotObject
	}
	for i, k := range path {
		var next []byte
		var err error
		switch v[0] {
		case '{':
			err = ingest.EachField(v, func(key, val []byte) {
				if string(key) == k {
					next = val
				}
			})
		case '[':
			n, aerr := strconv.Atoi(k)
			if aerr != nil || n < 0 {
				return nil, nil
			}
			err = ingest.EachElement(v, func(val []byte) error {
				if n == 0 {
					next = val
					return errStop
				}
				n--
				return nil
			})
			if errors.Is(err, errStop) {
				err = nil
			}
		}
		if err != nil && i == 0 {
			return nil, err
		}
		if next = bytes.TrimSpace(next); len(next) == 0 || string(next) == "null" {
			return nil, nil
		}
		v = next
	}
	return v, nil
}

// valueShape is the shape of a prompt held at a --prompt path.
func valueShape(v []byte) lineShape {
	switch v[0] {
	case '"':
		return lineText
	case '[':
	default:
		return lineNone
	}
	sh := lineNone
	ingest.EachElement(v, func(e []byte) error {
		switch e = bytes.TrimSpace(e); {
		case len(e) == 0:
		case e[0] == '{':
			sh = lineMessages
			ingest.EachField(e, func(key, _ []byte) {
				if string(key) == "from" {
					sh = lineConvos
				}
			})
		case e[0] == '-' || e[0] >= '0' && e[0] <= '9':
			sh = lineIDs
		}
		return errStop
	})
	return sh
}

// parsePrompt is ParsePrompt with the run's --prompt path.
func (fe *feeder) parsePrompt(line []byte, id string, n int64) (*Prompt, error) {
	if fe.cfg.Paths.Prompt == "" {
		return ParsePrompt(line, id, n)
	}
	return parsePromptAt(line, strings.Split(fe.cfg.Paths.Prompt, "."), id, n)
}

// parsePromptAt reads a prompt line whose prompt is at path (gen
// --prompt); its own max_new_tokens and sampling_params are read as
// ParsePrompt reads them.
func parsePromptAt(line []byte, path []string, id string, lineNo int64) (*Prompt, error) {
	var own struct {
		MaxNewTokens   *int            `json:"max_new_tokens"`
		SamplingParams json.RawMessage `json:"sampling_params"`
		Tools          json.RawMessage `json:"tools"` // a chat prompt's tools stay at the top level
	}
	if err := json.Unmarshal(line, &own); err != nil {
		return nil, fmt.Errorf("prompt line: %v", err)
	}
	v, err := valueAt(line, path)
	if err != nil {
		return nil, fmt.Errorf("prompt line: %v", err)
	}
	pl := promptLine{MaxNewTokens: own.MaxNewTokens, SamplingParams: own.SamplingParams, Tools: own.Tools}
	sh := lineNone
	if v != nil {
		sh = valueShape(v)
	}
	var dst any
	switch sh {
	case lineText:
		dst = &pl.Text
	case lineIDs:
		dst = &pl.InputIDs
	case lineMessages:
		dst = &pl.Messages
	case lineConvos:
		dst = &pl.Conversations
	default:
		return nil, noPromptAt{strings.Join(path, ".")}
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return nil, fmt.Errorf("%s: %v", strings.Join(path, "."), err)
	}
	return pl.prompt(id, lineNo)
}

// promptScan is what a dataset's prompts files hold, line by line.
type promptScan struct {
	// lines counts the lines read, counts by shape; partial says they
	// are the first of the files only (scanDataset).
	partial bool
	lines   int64
	counts  [numLineShapes]int64
	// keys are the top-level keys of the lines gen cannot send, in the
	// order first seen (at most maxKeys), firstAt the first such line
	// (FILE:LINE) and example a copy of it.
	keys    []string
	firstAt string
	example []byte
	// first is the dataset's first line, at firstPath (FILE:LINE; for a path that
	// matches no line); idHits counts the lines with an id at --id.
	first     []byte
	firstPath string
	idHits    int64
	// unsent counts the prompts the feeder did not send for their shape,
	// fed those it sent.
	unsent, fed atomic.Int64
}

const maxKeys = 12

// sendable counts the lines gen can send.
func (sc *promptScan) sendable() int64 {
	return sc.counts[lineIDs] + sc.counts[lineText] + sc.counts[lineMessages] + sc.counts[lineConvos]
}

// unsendable counts the lines of a shape gen cannot send.
func (sc *promptScan) unsendable() int64 { return sc.counts[lineNone] + sc.counts[lineMany] }

func (sc *promptScan) add(path string, line []byte, n int64, promptPath []string, idPath ingest.IDPath) {
	sh := classify(line, promptPath)
	sc.counts[sh]++
	if sh == lineBad {
		return
	}
	sc.lines++
	if sc.first == nil {
		sc.first, sc.firstPath = bytes.Clone(line), fmt.Sprintf("%s:%d", path, n)
	}
	if idPath != nil {
		var rec store.Record
		if _, err := ingest.NormalizeAt(line, store.Prompts, idPath, &rec); err == nil {
			sc.idHits++
		}
	}
	if sh != lineNone && sh != lineMany {
		return
	}
	if sc.example == nil {
		sc.example, sc.firstAt = bytes.Clone(line), fmt.Sprintf("%s:%d", path, n)
	}
	if sc.unsendable() <= 100 { // the keys of the first hundred
		for _, k := range objectKeys(line) {
			if len(sc.keys) < maxKeys && !contains(sc.keys, k) {
				sc.keys = append(sc.keys, k)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// objectKeys returns the keys of the JSON object v, in order (none when
// it is no object).
func objectKeys(v []byte) []string {
	var keys []string
	ingest.EachField(v, func(key, _ []byte) { keys = append(keys, string(key)) })
	return keys
}

// scanPrompts reads each dataset's prompts files for their lines' shapes
// (scanDataset), with the run's --prompt path, and counts the lines with
// an id at its --id path; a path that matches no line of a dataset is an
// ErrPromptPath, said with the keys the dataset's first line has.
func (fe *feeder) scanPrompts(datasets []Dataset) (map[string]*promptScan, error) {
	idPath, err := ingest.ParseIDPath(fe.cfg.Paths.ID)
	if err != nil {
		return nil, &pathError{fmt.Sprintf("--id: %v", err)}
	}
	var promptPath []string
	if p := fe.cfg.Paths.Prompt; p != "" {
		if promptPath = strings.Split(p, "."); contains(promptPath, "") {
			return nil, &pathError{fmt.Sprintf("--prompt %q has an empty key (want keys joined by dots, e.g. data.prompt)", p)}
		}
	}
	scans := map[string]*promptScan{}
	for _, d := range datasets {
		sc, err := scanDataset(d, promptPath, idPath)
		if err != nil {
			return nil, err
		}
		if sc.lines > 0 && idPath != nil && sc.idHits == 0 {
			return nil, &pathError{fmt.Sprintf("--id %s matches no line of dataset %s: %s; nothing was sent or indexed",
				fe.cfg.Paths.ID, d.Name, describeAt(sc.first, sc.firstPath, strings.Split(fe.cfg.Paths.ID, ".")))}
		}
		if sc.lines > 0 && promptPath != nil && sc.sendable() == 0 {
			return nil, &pathError{fmt.Sprintf("--prompt %s holds no prompt in any line of dataset %s (text, chat messages, conversations or token ids): %s; nothing was sent or indexed",
				fe.cfg.Paths.Prompt, d.Name, describeAt(sc.first, sc.firstPath, promptPath))}
		}
		scans[d.Name] = sc
	}
	return scans, nil
}

// describeAt says what line (the first, of file) holds along keys: its
// keys, and where keys leave what it has.
func describeAt(line []byte, file string, keys []string) string {
	out := fmt.Sprintf("its first line (%s) has the keys %s", file, strings.Join(objectKeys(line), ", "))
	for i := range keys {
		next, _ := valueAt(line, keys[:i+1])
		switch {
		case next == nil && i == 0:
			return out
		case next == nil:
			prev, _ := valueAt(line, keys[:i])
			if prev[0] == '{' {
				return out + fmt.Sprintf("; %s has the keys %s", strings.Join(keys[:i], "."), strings.Join(objectKeys(prev), ", "))
			}
			return out + fmt.Sprintf("; %s is %s", strings.Join(keys[:i], "."), kindOf(prev))
		case i == len(keys)-1:
			return out + fmt.Sprintf("; %s is %s", strings.Join(keys, "."), kindOf(next))
		}
	}
	return out
}

// kindOf names the kind of a JSON value.
func kindOf(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// scanBytes is how much of a dataset's prompts files scanDataset reads
// once it has seen a line gen can send (and, under --id, a line with an
// id there): ~25 ms of a quiet core, so that the first request of a
// 10 M-prompt set is not kept waiting for every line's shape.
const scanBytes = 4 << 20

// scanDataset reads d's prompts files for their lines' shapes: all of
// them when they are small, else their first scanBytes (sc.partial: the
// rest are read as the feeder sends them), but on to the end while no
// line gen can send (or, under --id, none with an id at idPath) is
// found, so a set gen cannot send is refused whatever its size.
func scanDataset(d Dataset, promptPath []string, idPath ingest.IDPath) (*promptScan, error) {
	sc := &promptScan{}
	var read int64
	for _, path := range d.Prompts {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		_, err = ingest.ReadLines(f, func(line []byte, n int64) error {
			if read >= scanBytes && sc.sendable() > 0 && (idPath == nil || sc.idHits > 0) {
				sc.partial = true
				return errStop
			}
			read += int64(len(line)) + 1
			sc.add(path, line, n, promptPath, idPath)
			return nil
		})
		f.Close()
		if errors.Is(err, errStop) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	return sc, nil
}
