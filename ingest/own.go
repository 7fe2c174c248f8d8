package ingest

import (
	"io"
	"os"

	"gendex/store"
)

// NormalizeAt is Normalize for a file whose lines keep their id at m (the
// path the index remembers for the file, ingest --id or gen --id; nil for
// the built-in rules), as the indexer reads them: a line without an id
// there returns ErrNoID (a prompt's is then known by its line, LineID).
func NormalizeAt(line []byte, stage store.Stage, m IDPath, rec *store.Record) (store.Stage, error) {
	if m == nil {
		return Normalize(line, stage, rec)
	}
	st, info, err := normalize(line, stage, m, rec)
	if err == nil && info.lineID {
		err = ErrNoID
	}
	return st, err
}

// GenOwned reports whether the file at path is one gen writes (answers,
// errors, turns: its first line is gen's, an object whose first key is
// "id" and that says when it finished or failed), or holds no complete
// line yet. `ingest --id` on a folder leaves such files to the built-in
// rules: their ids are gen's own "id", and a path given for the user's
// files must not be remembered for them.
func GenOwned(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	seen, own := false, false
	ReadLines(io.LimitReader(f, 64<<20), func(line []byte, _ int64) error {
		seen = true
		n, idFirst, when := 0, false, false
		EachField(line, func(key, _ []byte) {
			switch k := string(key); {
			case n == 0 && k == "id":
				idFirst = true
			case k == "finished_at", k == "failed_at":
				when = true
			}
			n++
		})
		own = idFirst && when
		return io.EOF // the first line decides
	})
	return own || !seen
}
