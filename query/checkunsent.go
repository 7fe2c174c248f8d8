package query

import (
	"fmt"
	"os"

	"gendex/store"
)

// unsentReadLimit bounds the prompts to go that check reads for their
// shape: past it, the count of those gen cannot send is a lower bound.
const unsentReadLimit = 20_000

// unansweredFinding is the reason of the n prompts of dataset name
// (folder dir) neither answered nor failed. Gen does not send a prompt
// that holds no prompt at its keys (it stays to go): when every one of
// them is such, the fix is gen with the --prompt that reads them; when
// some are, the fix says both runs. unsendable is gen's rule
// (CheckReaders.PromptUnsendable); nil: the prompts are not read, and the
// fix is gen's run alone.
func unansweredFinding(v *store.View, name, dir string, n uint64, files map[uint32]*os.File, unsendable func([]byte) (bool, string)) finding {
	what, gen := "prompts neither answered nor failed", "gendex gen --server URL "
	if s, err := v.Summary(name); err == nil && s.Samples() > 1 { // n counts answers: each sample of a prompt
		what = fmt.Sprintf("answers neither made nor failed (%d samples per prompt, gen --samples)", s.Samples())
		gen += fmt.Sprintf("--samples %d ", s.Samples())
	}
	f := finding{reason: ReasonUnanswered, blocks: true, count: n, detail: what, fix: gen + dir}
	if unsendable == nil {
		return f
	}
	var read, unsent uint64
	path := ""
	err := v.Missing(name, store.Prompts, func(id string) error {
		if read == unsentReadLimit {
			return errStopWalk
		}
		read++
		r, ok, err := v.Get(name, store.Prompts, store.PromptID(store.Raw, id)) // a sample's prompt
		if err != nil || !ok {
			return err
		}
		line, err := recordLine(v, &r, files)
		if err != nil {
			return nil // a file changed since: not this reason's to say
		}
		if bad, p := unsendable(line); bad {
			unsent++
			if path == "" {
				path = p
			}
		}
		return nil
	}, store.Raw, store.Errors)
	if unsent == 0 || err != nil && err != errStopWalk {
		return f
	}
	if path == "" {
		path = "PATH"
	}
	prompt := fmt.Sprintf("%s--prompt %s %s", gen, path, dir)
	atLeast := ""
	if read == unsentReadLimit && unsent < n {
		atLeast = "at least "
	}
	if unsent == n {
		f.detail = what + ": their lines hold no prompt at gen's keys (input_ids, text, messages, conversations), so gen does not send them"
		f.fix = prompt
		return f
	}
	f.detail = fmt.Sprintf("%s; %s%d of them hold no prompt at gen's keys (input_ids, text, messages, conversations), so gen does not send them", what, atLeast, unsent)
	f.fix = fmt.Sprintf("%s%s, then for those %d: %s", gen, dir, unsent, prompt)
	return f
}

// errStopWalk ends a walk early.
var errStopWalk = fmt.Errorf("stop")

// recordLine reads r's line through files (the check's open files, by
// file id), checked against the sum the index read; its error says why
// not, and how to read a changed file again.
func recordLine(v *store.View, r *store.Record, files map[uint32]*os.File) ([]byte, error) {
	f := files[r.File]
	if f == nil {
		path, ok := v.FilePath(r.File)
		if !ok {
			return nil, fmt.Errorf("a file of the dataset (id %d) is no longer in the index", r.File)
		}
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
		files[r.File] = f
	}
	line := make([]byte, r.Length)
	if _, err := f.ReadAt(line, r.Offset); err != nil || store.LineSum(line) != r.Sum {
		return nil, fmt.Errorf("%s:%d no longer holds the line the index read (gendex ingest --reread %s reads it again)", f.Name(), r.Line, quoteArg(f.Name()))
	}
	return line, nil
}
