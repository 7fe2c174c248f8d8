package store

import "encoding/binary"

var (
	bucketMeta     = []byte("meta")
	bucketFiles    = []byte("files")
	bucketFileIDs  = []byte("fileids")
	bucketDatasets = []byte("datasets")
	// bucketForgetting lists the files whose old records are being removed
	// (path -> empty), so that a pending removal is found in O(1).
	bucketForgetting = []byte("forgetting")
	// bucketReread lists the files forgotten and not read since (path ->
	// empty): they hold nothing in the index until read again.
	bucketReread = []byte("reread")

	keyVersion = []byte("version")
	keyStats   = []byte("stats")
	bucketHist = []byte("hist")
	bucketTS   = []byte("ts")
	// bucketByFile is a dataset's per-file key index: chunkKey(file, seq)
	// -> the ids a transaction added from that file (see appendChunkEntry),
	// so a file's records are found without scanning its stages, at the
	// cost of one Put per file per transaction.
	bucketByFile = []byte("byfile")
)

var stageBuckets = [numStages][]byte{[]byte("prompts"), []byte("raw"), []byte("tokenized"), []byte("errors"), []byte("turns"), []byte("excluded")}

func u32key(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// chunkKey is the byfile key of one chunk of file's ids: big-endian file
// id, then the byfile bucket's sequence number when it was written. All of
// a file's chunks share its 4-byte prefix, in the order they were written.
func chunkKey(file uint32, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, file), seq)
}

// appendChunkEntry adds one id of a stage to a chunk: stage byte, uvarint
// length, id.
func appendChunkEntry(b []byte, stage Stage, id []byte) []byte {
	b = append(b, byte(stage))
	b = binary.AppendUvarint(b, uint64(len(id)))
	return append(b, id...)
}

// nextChunkEntry reads the entry at the start of b and returns the rest;
// ok is false for a corrupt entry.
func nextChunkEntry(b []byte) (stage Stage, id, rest []byte, ok bool) {
	if len(b) < 2 {
		return 0, nil, nil, false
	}
	stage = Stage(b[0])
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || n > uint64(len(b)-1-w) || stage >= numStages {
		return 0, nil, nil, false
	}
	b = b[1+w:]
	return stage, b[:n], b[n:], true
}

// tsValue is one second of throughput: records, known completion tokens, and
// records whose completion count is unknown.
type tsValue struct{ records, tokens, unknown int64 }

func (v tsValue) encode() []byte {
	b := binary.AppendVarint(nil, v.records)
	b = binary.AppendVarint(b, v.tokens)
	return binary.AppendVarint(b, v.unknown)
}

func decodeTS(b []byte) (v tsValue) {
	var n int
	v.records, n = binary.Varint(b)
	if n <= 0 {
		return tsValue{}
	}
	b = b[n:]
	v.tokens, n = binary.Varint(b)
	if n <= 0 {
		return tsValue{}
	}
	v.unknown, _ = binary.Varint(b[n:])
	return v
}

func (v *tsValue) add(o tsValue) {
	v.records += o.records
	v.tokens += o.tokens
	v.unknown += o.unknown
}

// The completion-token histogram is stored in chunks of histChunk
// consecutive values: key = tokens / histChunk (big-endian uint32), value =
// (offset delta, count) uvarint pairs for the non-zero counts, in order. A
// dataset whose answers run to 16k tokens has 16 small chunks, read in
// microseconds.
const (
	histChunk     = 1024
	maxHistTokens = 1<<32*histChunk - 1
)

type histDelta struct{ off, delta int64 }

func decodeHistChunk(b []byte, fn func(off, n int64)) {
	off := int64(-1)
	for len(b) > 0 {
		d, n := binary.Uvarint(b)
		if n <= 0 {
			return
		}
		b = b[n:]
		c, n := binary.Uvarint(b)
		if n <= 0 {
			return
		}
		b = b[n:]
		off += int64(d) + 1
		fn(off, int64(c))
	}
}

// encodeHistChunk returns nil for a chunk of zeros.
func encodeHistChunk(counts *[histChunk]int64) []byte {
	var b []byte
	last := int64(-1)
	for off, n := range counts {
		if n <= 0 {
			continue
		}
		b = binary.AppendUvarint(b, uint64(int64(off)-last-1))
		b = binary.AppendUvarint(b, uint64(n))
		last = int64(off)
	}
	return b
}
