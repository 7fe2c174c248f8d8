package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Tx is a read-write transaction. Its counters are kept in memory and
// written once, just before the commit.
type Tx struct {
	btx   *bolt.Tx
	now   int64 // Unix ms: the time given to records without their own
	sets  map[string]*dsTx
	arena []byte // encoded records: bbolt keeps Put's slices until commit
}

// alloc encodes r into the transaction's arena. Slices handed to bbolt must
// not be reused before the commit, so the arena only grows.
func (tx *Tx) alloc(r *Record) []byte {
	if cap(tx.arena)-len(tx.arena) < 160+len(r.Finish)+len(r.ToolStop)+min(len(r.Message), maxMessage) {
		tx.arena = make([]byte, 0, 256<<10)
	}
	start := len(tx.arena)
	tx.arena = r.appendBinary(tx.arena)
	return tx.arena[start:len(tx.arena):len(tx.arena)]
}

type dsTx struct {
	bucket *bolt.Bucket
	stages [numStages]*bolt.Bucket
	// cursors holds one cursor per stage for the transaction's lookups
	// (see get).
	cursors [numStages]*bolt.Cursor
	byfile  *bolt.Bucket // per-file key index, see chunkKey
	// staleB and askingB are the dataset's stale and asking marks (owed.go),
	// nil when it has none.
	staleB, askingB *bolt.Bucket
	// added holds, per file, the chunk of ids added in this transaction.
	added map[uint32][]byte
	sum   Summary
	hist  map[int64]int64   // completion tokens -> delta, raw stage
	ts    map[int64]tsValue // unix second -> delta, raw stage
	// specHist: accept length in hundredths -> delta; specTS: unix second
	// -> delta; raw stage (see spec.go).
	specHist map[int64]int64
	specTS   map[int64]specSecond
	// hint is the dataset's missing-from hint H and answers the prompts,
	// answers and errors added in this transaction (see keyMissFrom).
	hint    []byte
	answers int
}

func newTx(btx *bolt.Tx) *Tx {
	return &Tx{btx: btx, now: time.Now().UnixMilli(), sets: make(map[string]*dsTx)}
}

// Now returns the time given to records indexed in this transaction that
// carry none of their own (Unix ms).
func (tx *Tx) Now() int64 { return tx.now }

// SetNow overrides the indexing time (for tests and replays).
func (tx *Tx) SetNow(ms int64) { tx.now = ms }

func (tx *Tx) dataset(name string) (*dsTx, error) {
	if d := tx.sets[name]; d != nil {
		return d, nil
	}
	if name == "" {
		return nil, fmt.Errorf("empty dataset name")
	}
	b, err := tx.btx.Bucket(bucketDatasets).CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("dataset %q: %w", name, err)
	}
	d := &dsTx{bucket: b, hist: map[int64]int64{}, ts: map[int64]tsValue{}, added: map[uint32][]byte{},
		specHist: map[int64]int64{}, specTS: map[int64]specSecond{}}
	for i, nm := range stageBuckets {
		if d.stages[i], err = b.CreateBucketIfNotExists(nm); err != nil {
			return nil, err
		}
		d.stages[i].FillPercent = 0.8
	}
	if d.byfile, err = b.CreateBucketIfNotExists(bucketByFile); err != nil {
		return nil, err
	}
	d.byfile.FillPercent = 0.8
	d.staleB, d.askingB = b.Bucket(bucketStale), b.Bucket(bucketAsking)
	if v := b.Get(keyStats); v != nil {
		if err := readSummary(b, v, &d.sum); err != nil {
			return nil, fmt.Errorf("dataset %q: reading counters: %w", name, err)
		}
	}
	if !d.sum.Overlap.NoPromptKnown {
		d.countNoPrompt()
	}
	d.hint = readHint(b, &d.sum)
	d.sum.Dataset = name
	tx.sets[name] = d
	return d, nil
}

// countNoPrompt counts the answers whose id matches no prompt
// (Overlap.RawNoPrompt), for a dataset whose counters were written before
// they kept it (none for a new one): once, on its first write since.
func (d *dsTx) countNoPrompt() {
	d.sum.Overlap.RawNoPrompt = 0
	if d.sum.Stages[Raw].Records > 0 {
		c := d.stages[Raw].Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if d.sum.Stages[Prompts].Records == 0 || d.get(Prompts, unitPrompt(k)) == nil {
				d.sum.Overlap.RawNoPrompt++
			}
		}
	}
	d.sum.Overlap.NoPromptKnown = true
}

// get returns stage s's value for id, or nil, through the transaction's
// cursor for s: Bucket.Get makes a cursor, and grows its stack, on every
// call. Seek starts from the root each time, so the cursor stays right
// after the bucket changes.
func (d *dsTx) get(s Stage, id []byte) []byte {
	c := d.cursors[s]
	if c == nil {
		c = d.stages[s].Cursor()
		d.cursors[s] = c
	}
	k, v := c.Seek(id)
	if k == nil || !bytes.Equal(k, id) {
		return nil
	}
	return v
}

// Add indexes r under dataset and stage, and lists it under r.File in the
// per-file key index. If the id is already indexed for that stage, nothing
// changes, the stage's Duplicates counter goes up and the first record is
// returned as dup. Records with Time 0 get tx.Now(); r.Finish is stored
// as ClipFinish makes it. A record CheckRecord refuses returns an error
// matching ErrUnstorable and changes nothing: the transaction goes on.
func (tx *Tx) Add(dataset string, stage Stage, r *Record) (dup *Record, err error) {
	d, err := tx.prepare("add", dataset, stage, r)
	if err != nil {
		return nil, err
	}
	id := []byte(r.ID)
	st := &d.sum.Stages[stage]
	if st.Records > 0 {
		if v := d.get(stage, id); v != nil {
			first := &Record{ID: r.ID}
			if err := decodeRecord(v, first); err != nil {
				return nil, fmt.Errorf("dataset %q %s id %q: %w", dataset, stage, r.ID, err)
			}
			st.Duplicates++
			if stage == Errors {
				return first, d.unask(id) // failed for good, once more
			}
			return first, nil
		}
	}
	if r.Time == 0 {
		r.Time = tx.now
		r.OwnTime = false
	}
	before, answer := d.lookup(id, stage)
	if err := d.stages[stage].Put(id, tx.alloc(r)); err != nil {
		return nil, fmt.Errorf("dataset %q: %w", dataset, err)
	}
	d.added[r.File] = appendChunkEntry(d.added[r.File], stage, id)
	if stage == Prompts || answeredStages.has(stage) {
		d.answers++
	}
	if stage == Prompts && before&answeredStages == 0 {
		d.lowerHint(id) // a prompt without an answer
	}
	d.sum.Overlap.apply(before, before|1<<stage)
	d.moveUnits(stage, id, r, before, 1)
	d.count(stage, r, 1)
	if err := d.moveMarks(stage, id, before, before|1<<stage); err != nil {
		return nil, err
	}
	return nil, d.judgeAdded(stage, id, r, before, answer)
}

// Merge folds r into the record the stage already holds for r.ID when that
// record came from the same file (r.File): the lines are parts of one
// response, such as the chunks of a streamed one. The stored record takes
// each of r's known counts, r's finish reason and message when r has them,
// r's shape when r has a completion count (or the stored one has no shape),
// and r's time when it has its own and the stored one has none; it keeps
// its place (the first line's offset, length, line and sum). The counters
// change exactly: the old record is taken off them and the merged one
// added. On return *r is the merged record and old the record before it.
//
// When the stage holds no record of r.ID, or holds one from another file,
// Merge changes nothing and returns nil: the caller then calls Add, which
// indexes r or counts it as a duplicate.
func (tx *Tx) Merge(dataset string, stage Stage, r *Record) (old *Record, err error) {
	if stage >= numStages {
		return nil, fmt.Errorf("merge: bad stage %d", stage)
	}
	if r.ID == "" {
		return nil, fmt.Errorf("merge: empty id")
	}
	d, err := tx.dataset(dataset)
	if err != nil {
		return nil, err
	}
	id := []byte(r.ID)
	if old, err = d.stored(stage, r.ID); old == nil || err != nil {
		return nil, err
	}
	if old.File != r.File {
		return nil, nil
	}
	m := *old
	for _, c := range [...]struct{ dst, src *int64 }{
		{&m.PromptTokens, &r.PromptTokens}, {&m.CompletionTokens, &r.CompletionTokens},
		{&m.CachedTokens, &r.CachedTokens}, {&m.ReasoningTokens, &r.ReasoningTokens},
	} {
		if *c.src >= 0 {
			*c.dst = *c.src
		}
	}
	if r.cleanSpec(); r.HasSpec() {
		m.SpecVerify = r.SpecVerify
	}
	if r.HasDrafts() {
		m.SpecAccepted, m.SpecProposed = r.SpecAccepted, r.SpecProposed
	}
	if r.Finish != "" {
		m.Finish = r.Finish
	}
	if r.Message != "" {
		m.Message = r.Message
	}
	if r.ToolStop != "" {
		m.ToolStop = ClipFinish(r.ToolStop)
	}
	if r.CompletionTokens >= 0 || m.Shape == ShapeUnknown {
		m.Shape = r.Shape
	}
	if !m.OwnTime && r.OwnTime && r.Time != 0 {
		m.Time, m.OwnTime = r.Time, true
	}
	if err := d.stages[stage].Put(id, tx.alloc(&m)); err != nil {
		return nil, fmt.Errorf("dataset %q: %w", dataset, err)
	}
	d.count(stage, old, -1)
	d.count(stage, &m, 1)
	*r = m
	return old, nil
}

// prepare checks and cleans r for op (Add, Replace) into dataset's stage
// and returns the dataset: ErrUnstorable (CheckRecord) changes nothing.
func (tx *Tx) prepare(op, dataset string, stage Stage, r *Record) (*dsTx, error) {
	if stage >= numStages {
		return nil, fmt.Errorf("%s: bad stage %d", op, stage)
	}
	if err := CheckRecord(r); err != nil {
		return nil, err
	}
	r.Finish = ClipFinish(r.Finish)
	r.ToolStop = ClipFinish(r.ToolStop)
	r.cleanSpec()
	return tx.dataset(dataset)
}

// stored returns the record stage holds for id, or nil.
func (d *dsTx) stored(stage Stage, id string) (*Record, error) {
	if d.sum.Stages[stage].Records == 0 {
		return nil, nil
	}
	v := d.get(stage, []byte(id))
	if v == nil {
		return nil, nil
	}
	r := &Record{ID: id}
	if err := decodeRecord(v, r); err != nil {
		return nil, fmt.Errorf("dataset %q %s id %q: %w", d.sum.Dataset, stage, id, err)
	}
	return r, nil
}

// count applies r to the counters with sign +1 (added) or -1 (removed).
func (d *dsTx) count(stage Stage, r *Record, sign int64) {
	d.sum.Stages[stage].add(r, int(sign))
	if stage != Raw {
		return
	}
	sec := r.Time / 1000
	v := d.ts[sec]
	v.records += sign
	if r.CompletionTokens >= 0 {
		v.tokens += sign * r.CompletionTokens
		d.hist[r.CompletionTokens] += sign
	} else {
		v.unknown += sign
	}
	d.ts[sec] = v
	d.countSpec(r, sec, sign)
}

// remove deletes the record of id k (whose stored form is rec) from a
// stage and from every counter. Its entry in the per-file key index goes
// with its chunk.
func (d *dsTx) remove(stage Stage, k []byte, rec *Record) error {
	if err := d.stages[stage].Delete(k); err != nil {
		return err
	}
	after := d.membership(k, stage)
	if answeredStages.has(stage) && after.has(Prompts) && after&answeredStages == 0 {
		d.lowerHint(k) // a prompt that lost its answer or error
	}
	d.sum.Overlap.apply(after|1<<stage, after)
	d.moveUnits(stage, k, rec, after, -1)
	d.count(stage, rec, -1)
	return d.moveMarks(stage, k, after|1<<stage, after)
}

// ChunkPos is where a removal stands in a file's per-file key chunks: the
// chunk being read (nil: the file's first) and the byte offset of its next
// entry.
type ChunkPos struct {
	Key []byte `json:"chunk,omitempty"`
	Off int    `json:"chunk_off,omitempty"`
}

// removeKeyed removes the records of file listed in dataset's per-file key
// index, looking at no more than limit ids, deleting each chunk once read
// to its end; pos is where it starts and is moved to where it stopped. done
// reports that no chunk of the file is left. Only one chunk is held in
// memory.
func (tx *Tx) removeKeyed(dataset string, file uint32, pos *ChunkPos, limit int) (removed int, done bool, err error) {
	d, err := tx.dataset(dataset)
	if err != nil {
		return 0, false, err
	}
	prefix := binary.BigEndian.AppendUint32(nil, file)
	var rec Record
	for seen := 0; seen < limit; {
		k, v := d.byfile.Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			*pos = ChunkPos{}
			return removed, true, nil
		}
		off := 0
		if bytes.Equal(k, pos.Key) {
			off = min(pos.Off, len(v))
		}
		key, rest := bytes.Clone(k), bytes.Clone(v[off:])
		for len(rest) > 0 && seen < limit {
			stage, id, next, ok := nextChunkEntry(rest)
			if !ok {
				return 0, false, fmt.Errorf("dataset %q: corrupt per-file key chunk %x (re-create the index with 'gendex ingest')", dataset, key)
			}
			off += len(rest) - len(next)
			rest = next
			seen++
			v := d.get(stage, id)
			if v == nil {
				continue // removed before, or never kept
			}
			if err := decodeRecord(v, &rec); err != nil {
				return 0, false, fmt.Errorf("dataset %q %s id %q: %w", dataset, stage, id, err)
			}
			if rec.File != file {
				continue
			}
			rec.ID = string(id)
			if err := d.remove(stage, id, &rec); err != nil {
				return 0, false, err
			}
			removed++
		}
		if len(rest) > 0 {
			*pos = ChunkPos{Key: key, Off: off}
			return removed, false, nil
		}
		if err := d.byfile.Delete(key); err != nil {
			return 0, false, err
		}
		*pos = ChunkPos{}
	}
	return removed, false, nil
}

// removeScan removes records of file from one stage of dataset by walking
// the stage from the key after `after` (nil: the first), for files indexed
// before the per-file key index existed. It looks at no more than 8*limit
// keys and removes no more than limit records, and returns where it
// stopped: next is nil when the stage is done.
func (tx *Tx) removeScan(dataset string, stage Stage, file uint32, after []byte, limit int) (removed int, next []byte, err error) {
	d, err := tx.dataset(dataset)
	if err != nil {
		return 0, nil, err
	}
	var keys [][]byte
	var recs []Record
	var rec Record
	c := d.stages[stage].Cursor()
	var k, v []byte
	if after == nil {
		k, v = c.First()
	} else if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
		k, v = c.Next()
	}
	for seen := 0; k != nil && seen < 8*limit && len(keys) < limit; k, v = c.Next() {
		seen++
		next = bytes.Clone(k)
		if err := decodeRecord(v, &rec); err != nil {
			return 0, nil, fmt.Errorf("dataset %q %s id %q: %w", dataset, stage, k, err)
		}
		if rec.File == file {
			rec.ID = string(k)
			keys = append(keys, next)
			recs = append(recs, rec)
		}
	}
	if k == nil {
		next = nil
	}
	for i, k := range keys {
		if err := d.remove(stage, k, &recs[i]); err != nil {
			return 0, nil, err
		}
	}
	return len(keys), next, nil
}

// AdjustDuplicates changes a stage's duplicate counter (used when a file's
// duplicates are forgotten with the file).
func (tx *Tx) AdjustDuplicates(dataset string, stage Stage, delta int64) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	d.sum.Stages[stage].Duplicates += uint64(delta)
	return nil
}

// flush writes the counters of every dataset touched by the transaction.
func (tx *Tx) flush() error {
	for name, d := range tx.sets {
		v, err := json.Marshal(&d.sum)
		if err != nil {
			return err
		}
		if err := d.bucket.Put(keyStats, v); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		if err := flushHist(d); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		if err := flushTS(d); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		if err := flushSpec(d); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		if err := flushChunks(d); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
		if err := flushHint(d); err != nil {
			return fmt.Errorf("dataset %q: %w", name, err)
		}
	}
	return nil
}

// flushChunks writes one per-file key chunk for each file that added
// records in the transaction.
func flushChunks(d *dsTx) error {
	for file, ids := range d.added {
		seq, err := d.byfile.NextSequence()
		if err != nil {
			return err
		}
		if err := d.byfile.Put(chunkKey(file, seq), ids); err != nil {
			return err
		}
	}
	return nil
}

func flushHist(d *dsTx) error { return addHist(d.bucket, bucketHist, d.hist) }

// addHist adds deltas (value -> change of its count, values above
// maxHistTokens counted at maxHistTokens) to the chunked histogram in
// bucket name of b: each touched chunk is read and rewritten once, and
// deleted when it is all zeros. The token and accept-length histograms
// are both kept this way.
func addHist(b *bolt.Bucket, name []byte, deltas map[int64]int64) error {
	if len(deltas) == 0 {
		return nil
	}
	hb, err := b.CreateBucketIfNotExists(name)
	if err != nil {
		return err
	}
	byChunk := map[uint32][]histDelta{}
	for v, delta := range deltas {
		if delta != 0 {
			v = min(v, maxHistTokens)
			byChunk[uint32(v/histChunk)] = append(byChunk[uint32(v/histChunk)], histDelta{v % histChunk, delta})
		}
	}
	for c, ds := range byChunk {
		k := u32key(c)
		var counts [histChunk]int64
		decodeHistChunk(hb.Get(k), func(off, n int64) { counts[off] = n })
		for _, hd := range ds {
			counts[hd.off] += hd.delta
		}
		if v := encodeHistChunk(&counts); v == nil {
			err = hb.Delete(k)
		} else {
			err = hb.Put(k, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func flushTS(d *dsTx) error {
	if len(d.ts) == 0 {
		return nil
	}
	tb, err := d.bucket.CreateBucketIfNotExists(bucketTS)
	if err != nil {
		return err
	}
	tb.FillPercent = 0.9
	for sec, delta := range d.ts {
		k := u64key(uint64(sec))
		v := decodeTS(tb.Get(k))
		v.add(delta)
		if v.records <= 0 {
			err = tb.Delete(k)
		} else {
			err = tb.Put(k, v.encode())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
