package store

import (
	"bytes"
	"encoding/json"
)

// Maker is what made some of a file's answers: a model (empty when the
// lines name none), and whether gendex's simulator did.
type Maker struct {
	Model     string `json:"model,omitempty"`
	Simulated bool   `json:"simulated,omitempty"`
	// Provenance is how the lines were made, as gen writes it in each
	// answer ("provenance": the sampling it sent, the server that
	// answered), a compact JSON object kept once per distinct value; nil
	// for lines without one (another tool's, or an index written before
	// it was kept): their provenance is unknown.
	Provenance json.RawMessage `json:"provenance,omitempty"`
	Lines      uint64          `json:"lines"`
	// Answers counts the maker's answers that count: those the index
	// holds a record of (a duplicate id's line is not one, nor an answer a
	// redo replaced since). Known only when the file's MakerAnswers is.
	Answers uint64 `json:"answers,omitempty"`
}

// MakerCount is how many of the file's answers its maker i made: its
// answers that count (answers true), or, in a file indexed before those
// were kept, its answer lines (answers false: replaced and duplicate
// lines among them).
func (fs *FileState) MakerCount(i int) (n uint64, answers bool) {
	if fs.MakerAnswers {
		return fs.Makers[i].Answers, true
	}
	return fs.Makers[i].Lines, false
}

// countMaker moves the answers of the file's maker m (counted from 1; 0:
// unknown) by delta, when the file keeps them.
func (fs *FileState) countMaker(m uint32, delta int) {
	if !fs.MakerAnswers || m == 0 || int(m) > len(fs.Makers) {
		return
	}
	a := &fs.Makers[m-1].Answers
	switch {
	case delta > 0:
		*a += uint64(delta)
	case *a >= uint64(-delta):
		*a -= uint64(-delta)
	default:
		*a = 0
	}
}

// CountAnswer counts r as an answer of its maker in fs, r's file (an
// answer added, or one that replaced another), or, with delta -1, takes
// it off (an answer of fs that another of the same file replaced).
func (fs *FileState) CountAnswer(r *Record, delta int) { fs.countMaker(r.Maker, delta) }

// AddMaker counts n more lines made by model and kind, with provenance
// prov (nil: unknown).
func AddMaker(ms []Maker, model string, simulated bool, prov json.RawMessage, n uint64) []Maker {
	for i := range ms {
		if ms[i].Model == model && ms[i].Simulated == simulated && bytes.Equal(ms[i].Provenance, prov) {
			ms[i].Lines += n
			return ms
		}
	}
	return append(ms, Maker{Model: model, Simulated: simulated, Provenance: prov, Lines: n})
}
