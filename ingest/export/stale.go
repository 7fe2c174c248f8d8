package export

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"gendex/ingest"
	"gendex/store"
)

// A record or exclusion built from an answer that a redo replaced (the
// store's stale ids) cannot stay in its file: SpecForge reads
// tokenized.jsonl as it is. Before deciding anything, Export rewrites each
// output without the lines of stale ids: to a temporary file beside it,
// locked before it is written, fsynced, then renamed over the output (so
// the output is locked throughout, and a crash leaves the old file or the
// new one, whole). The index then forgets both outputs and reads them
// again, and the stale ids, which have no record now, get theirs from
// their newest answer like any answer without one. A crash at any step
// leaves the ids stale, and the next export does the rest.

// dropStale takes the stale ids' records and exclusions out of out, and
// returns how many lines it took out.
func (x *Exporter) dropStale(ctx context.Context, d *Dataset, out *outputs) (int, error) {
	stale := map[string]bool{}
	err := x.Ix.DB.View(func(v *store.View) error {
		return v.Stale(d.Name, func(id string) error { stale[id] = true; return nil })
	})
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	dropped := 0
	for _, o := range []struct {
		f   **os.File
		src ingest.Source
	}{{&out.tok, out.tokSrc}, {&out.exc, out.excSrc}} {
		nf, n, err := rewriteWithout(*o.f, o.src, stale)
		if err != nil {
			return dropped, fmt.Errorf("taking the records of replaced answers out of %s: %w", o.src.Path, err)
		}
		if n == 0 {
			continue
		}
		(*o.f).Close() // its lock went with the old file; nf holds the new one's
		*o.f = nf
		if d.Held != nil {
			d.Held.Tokenized, d.Held.Excluded = out.tok, out.exc
		}
		dropped += n
		if _, err := x.Ix.Reread(ctx, o.src); err != nil {
			return dropped, err
		}
	}
	ids := make([]string, 0, len(stale))
	for id := range stale {
		ids = append(ids, id)
	}
	if err := x.Ix.DB.Update(func(tx *store.Tx) error { return tx.ClearStale(d.Name, ids) }); err != nil {
		return dropped, err
	}
	if dropped > 0 && x.Logf != nil {
		x.Logf("export: %s: took %d records and exclusions of replaced answers out of %s and %s; their new answers' are made now",
			d.Name, dropped, filepath.Base(out.tokSrc.Path), filepath.Base(out.excSrc.Path))
	}
	return dropped, nil
}

// rewriteWithout writes f's lines but those of the ids in drop to a file
// that takes src.Path's place, and returns it, open and locked, with how
// many lines it left out. When it leaves none out, f stays and nf is nil.
func rewriteWithout(f *os.File, src ingest.Source, drop map[string]bool) (nf *os.File, n int, err error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	// First only count: most outputs hold no stale line.
	keep := func(line []byte) bool {
		var rec store.Record
		if _, err := ingest.Normalize(line, src.Stage, &rec); err != nil {
			return true // not ours to judge: kept as it is
		}
		return !drop[rec.ID]
	}
	_, err = ingest.ReadLines(io.NewSectionReader(f, 0, fi.Size()), func(line []byte, _ int64) error {
		if !keep(line) {
			n++
		}
		return nil
	})
	if err != nil || n == 0 {
		return nil, 0, err
	}
	tmp := src.Path + ".rewrite"
	os.Remove(tmp) // a crashed rewrite's: ours, as the output is ours (locked)
	nf, err = os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, err
	}
	fail := func(err error) (*os.File, int, error) {
		nf.Close()
		os.Remove(tmp)
		return nil, 0, err
	}
	if err := syscall.Flock(int(nf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fail(err)
	}
	w := bufio.NewWriterSize(nf, 1<<20)
	_, err = ingest.ReadLines(io.NewSectionReader(f, 0, fi.Size()), func(line []byte, _ int64) error {
		if !keep(line) {
			return nil
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		return w.WriteByte('\n')
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = nf.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, src.Path)
	}
	if err != nil {
		return fail(err)
	}
	if dir, err := os.Open(filepath.Dir(src.Path)); err == nil {
		dir.Sync()
		dir.Close()
	}
	return nf, n, nil
}
