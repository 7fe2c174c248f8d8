package query

import (
	"fmt"
	"os"
	"path/filepath"

	"gendex/store"
)

// An AnswerReader reads an answer line as export reads it to make the
// answer's record (query does not import ingest: main gives one). rec is
// the line's index record, mapping its file's mapping (ingest --map; ""
// for none).
type AnswerReader func(line []byte, rec *store.Record, mapping string) (CheckedAnswer, error)

// CheckedAnswer is what the check reads of one answer line.
type CheckedAnswer struct {
	// Turns are every assistant turn its record holds: one for a single
	// answer, one per turn of a conversation or step of a tool
	// conversation.
	Turns []CheckedTurn
	// Tokens is the length of its conversations record as export --max-len
	// measures it (the last turn's prompt + completion tokens), or
	// store.Unknown.
	Tokens int64
}

// CheckedTurn is one assistant turn of an answer.
type CheckedTurn struct {
	Text      string // its content ("" when it has none)
	Reasoning string // its reasoning kept apart ("" when none)
	Calls     int    // the tool calls it makes
}

// recordStats is what a walk over a dataset's records counts.
type recordStats struct {
	truncated uint64
	// --max-length: the records over it, their tokens, the longest, and
	// how many of them are ids records; the records of unknown length.
	tooLong, tooLongTokens, longest, idsTooLong, lenUnknown uint64
	// The content checks: read is false when they were not made (why says
	// why).
	read                  bool
	why                   string
	think, empty, records uint64
	// The texts: a hash of a text -> the prompts with it (texts) and the
	// answers with it (textAnswers); prompt, the prompt being read;
	// prompts, those with a record; the prompts whose samples were alike
	// and their answers.
	texts, textAnswers         map[uint64]uint64
	prompt                     promptTexts
	prompts                    uint64
	alikePrompts, alikeAnswers uint64
	samples                    uint64            // the dataset's samples per prompt (Summary.Samples), for a fix
	mappings                   map[uint32]string // an answer file's mapping (ingest --map), by file id
	// listing is the reason whose ids the walk collects (CheckOptions.IDs;
	// "": none, nothing is kept); ids are its ids, in id order, and
	// textsOf, for repeated_text, each answer's texts until the walk ends.
	listing string
	ids     []string
	textsOf []answerTexts
}

// answerTexts is an answer's id and the hashes of its distinct texts.
type answerTexts struct {
	id    string
	texts []uint64
}

// list collects id when the walk lists the ids of reason.
func (rs *recordStats) list(reason, id string) {
	if rs.listing == reason {
		rs.ids = append(rs.ids, id)
	}
}

// checkRecords walks the dataset's records (tokenized), each with its
// answer's counts and, for the content checks and a conversation's
// length, its answer's line.
func checkRecords(v *store.View, name string, o CheckOptions, files map[uint32]*os.File) (recordStats, error) {
	rs := recordStats{read: o.Answers != nil, texts: map[uint64]uint64{}, textAnswers: map[uint64]uint64{}, mappings: map[uint32]string{}, listing: o.IDs}
	if !rs.read {
		rs.why = "this reader of the index cannot read answers"
	}
	err := v.Each(name, store.Tokenized, func(tr *store.Record) error {
		ar, ok, err := v.Get(name, store.Raw, tr.ID)
		if err != nil || !ok {
			return err // a record without an answer is the owed count's
		}
		rs.records++
		if store.Truncated(ar.Finish) {
			rs.truncated++
			rs.list(ReasonTruncatedKept, tr.ID)
		}
		a, read := rs.readAnswer(v, &ar, files, o.Answers)
		if o.MaxLength > 0 && rs.measure(tr, a, read, o.MaxLength) {
			rs.list(ReasonTooLong, tr.ID)
		}
		if read {
			j := rs.judge(a)
			rs.count(tr.ID, j.texts)
			if j.empty {
				rs.list(ReasonEmpty, tr.ID)
			}
			if j.think {
				rs.list(ReasonThink, tr.ID)
			}
			if rs.listing == ReasonRepeated {
				rs.textsOf = append(rs.textsOf, answerTexts{tr.ID, j.texts})
			}
		}
		return nil
	})
	rs.endPrompt()
	return rs, err
}

// measure counts one record against maxLength: an ids record by its
// input_ids (the count the index keeps of it), a conversations record as
// export --max-len measures it (a.Tokens; read says a was read). It
// reports whether the record is longer.
func (rs *recordStats) measure(tr *store.Record, a CheckedAnswer, read bool, maxLength int) (over bool) {
	n, ids := tr.PromptTokens, tr.PromptTokens >= 0
	if !ids && read {
		n = a.Tokens
	}
	switch {
	case n < 0:
		rs.lenUnknown++
	case n > int64(maxLength):
		rs.tooLong++
		rs.tooLongTokens += uint64(n)
		rs.longest = max(rs.longest, uint64(n))
		if ids {
			rs.idsTooLong++
		}
		return true
	}
	return false
}

// lengths is the --max-length findings of dataset name (none without
// one). Its fix makes the records again where they are, as export
// --max-len measures them: the same way as the check.
func (rs *recordStats) lengths(v *store.View, name string, maxLength int, dir string) []finding {
	if maxLength <= 0 {
		return nil
	}
	var fs []finding
	if rs.tooLong > 0 {
		flags := ""
		if rs.idsTooLong == rs.tooLong {
			flags = " --format ids"
		}
		flags += fmt.Sprintf(" --max-len %d", maxLength)
		file := recordsFile(v, name, dir)
		if records := filepath.Dir(file); records != dir {
			flags += " --out " + filepath.Dir(records) // export --out ROOT writes ROOT/<dataset>/
		}
		fs = append(fs, finding{reason: ReasonTooLong, blocks: true, count: rs.tooLong, tokens: rs.tooLongTokens,
			detail: fmt.Sprintf("records longer than --max-length %d tokens, the longest %d (a record as export --max-len measures it: its input_ids, or its last turn's prompt + completion tokens)", maxLength, rs.longest),
			fix:    fmt.Sprintf("move %s aside and run gendex export%s %s", file, flags, dir)})
	}
	if rs.lenUnknown > 0 {
		why := "no input_ids, and their answer's last turn carries no token count"
		if !rs.read {
			why = "no input_ids, and their answers were not read: " + rs.why
		}
		fs = append(fs, finding{reason: ReasonLenUnknown, count: rs.lenUnknown,
			detail: "records whose length is unknown (" + why + ")"})
	}
	return fs
}

// readAnswer reads the answer line of r through read; ok is false when it
// was not read (and the content checks stop, saying why).
func (rs *recordStats) readAnswer(v *store.View, r *store.Record, files map[uint32]*os.File, read AnswerReader) (a CheckedAnswer, ok bool) {
	if !rs.read {
		return a, false
	}
	line, err := recordLine(v, r, files)
	if err != nil {
		rs.read, rs.why = false, err.Error()
		return a, false
	}
	mapping, seen := rs.mappings[r.File]
	if !seen {
		if path, ok := v.FilePath(r.File); ok {
			if st, ok, _ := v.File(path); ok {
				mapping = st.IDPath
			}
		}
		rs.mappings[r.File] = mapping
	}
	a, err = read(line, r, mapping)
	if err != nil {
		a = CheckedAnswer{Tokens: store.Unknown} // no turn: empty
	}
	return a, true
}

// recordsFile is the file of the dataset's training records the index
// counts (tokenized.jsonl first), or dir's tokenized.jsonl.
func recordsFile(v *store.View, name, dir string) string {
	var file string
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset == name && f.Stage == store.Tokenized && (file == "" || filepath.Base(f.Path) == "tokenized.jsonl") {
			file = f.Path
		}
		return nil
	})
	if file == "" {
		return filepath.Join(dir, "tokenized.jsonl")
	}
	return file
}
