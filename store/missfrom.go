package store

import (
	"bytes"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// A dataset's missing-from hint lets View.Missing(ds, Prompts, fn, Raw,
// Errors) start near the first prompt without an answer instead of
// stepping over every answered one from the first key (a linear walk: 0.6 s
// at 10 M prompts with the first 5 M answered).
//
//	datasets/<name>/missfrom   fingerprint (32 bytes) + H
//
// H says: every prompt key below H has a record in raw or in errors. It is
// kept by the write transactions only (never on a read path):
//   - lowered to k when a prompt k < H is added without an answer or an
//     error (Tx.Add) and when the answer or error of a prompt k < H is
//     removed and it has the other neither (dsTx.remove: a file forgotten);
//     Merge and Replace keep an id's membership; a dropped dataset takes
//     its hint with its bucket;
//   - moved forward at commit (flush) over at most hintBudget answered
//     prompt keys, plus two per prompt, answer or error the transaction
//     added, so a run's commits stay cheap and H catches up as it goes.
//
// The fingerprint is the byfile bucket's sequence and the prompts, raw and
// errors record counts the hint was written with. A writer that does not
// know the hint (an older gendex) bumps the sequence on every transaction
// that adds a record and lowers a count on every removal, so its changes
// void the hint: Missing then walks from the first key, as it always did,
// until a writer that knows the hint writes it again (from the first key).
var keyMissFrom = []byte("missfrom")

// hintBudget is how many answered prompt keys a commit may step over to move
// a dataset's hint forward, besides two per record it added.
var hintBudget = 4096

// hintKept false makes transactions neither lower nor write the hint: an
// older gendex's writes, for tests.
var hintKept = true

const fingerprintLen = 32

// fingerprint is what a hint is written with (see keyMissFrom).
func fingerprint(seq uint64, s *Summary) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, fingerprintLen), seq)
	for _, st := range [...]Stage{Prompts, Raw, Errors} {
		b = binary.BigEndian.AppendUint64(b, s.Stages[st].Records)
	}
	return b
}

// readHint returns a dataset's hint H, or nil (walk from the first key)
// when it has none or one another writer voided. s is the dataset's stored
// counters.
func readHint(b *bolt.Bucket, s *Summary) []byte {
	v := b.Get(keyMissFrom)
	fb := b.Bucket(bucketByFile)
	if len(v) < fingerprintLen || fb == nil {
		return nil
	}
	if !bytes.Equal(v[:fingerprintLen], fingerprint(fb.Sequence(), s)) {
		return nil
	}
	return bytes.Clone(v[fingerprintLen:])
}

// lowerHint makes k missing-safe: H goes down to k when k is below it.
func (d *dsTx) lowerHint(k []byte) {
	if hintKept && bytes.Compare(k, d.hint) < 0 {
		d.hint = bytes.Clone(k)
	}
}

// answeredStages are the stages whose records answer a prompt.
const answeredStages = membership(1<<Raw | 1<<Errors)

// advanceHint moves H forward over answered prompt keys, stepping over at
// most budget of them, and leaves it at the first prompt without a record
// in raw or errors (or just past the last prompt).
func (d *dsTx) advanceHint(budget int) {
	c := d.stages[Prompts].Cursor()
	others := [...]*bolt.Cursor{d.stages[Raw].Cursor(), d.stages[Errors].Cursor()}
	var heads [len(others)][]byte
	k, _ := c.Seek(d.hint)
	for i, oc := range others {
		heads[i], _ = oc.Seek(d.hint)
	}
	var last []byte
	for n := 0; k != nil && n < budget; n++ {
		found := false
		for i, oc := range others {
			for heads[i] != nil && bytes.Compare(heads[i], k) < 0 {
				heads[i], _ = oc.Next()
			}
			found = found || (heads[i] != nil && bytes.Equal(heads[i], k))
		}
		if !found {
			break
		}
		last = k
		k, _ = c.Next()
	}
	switch {
	case k != nil:
		d.hint = bytes.Clone(k)
	case last != nil: // past the last prompt: the least key above it
		d.hint = append(bytes.Clone(last), 0)
	}
}

// flushHint moves the hint forward and writes it with its fingerprint; the
// byfile sequence must be final (after flushChunks).
func flushHint(d *dsTx) error {
	if !hintKept {
		return nil
	}
	if d.sum.Samples() > 1 {
		d.hint = nil // a sampled dataset keeps none: Missing walks from the first prompt
	} else {
		d.advanceHint(hintBudget + 2*d.answers)
	}
	v := append(fingerprint(d.byfile.Sequence(), &d.sum), d.hint...)
	return d.bucket.Put(keyMissFrom, v)
}
