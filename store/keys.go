package store

import "encoding/binary"

var (
	bucketMeta     = []byte("meta")
	bucketFiles    = []byte("files")
	bucketFileIDs  = []byte("fileids")
	bucketDatasets = []byte("datasets")

	keyVersion = []byte("version")
	keyStats   = []byte("stats")
	bucketHist = []byte("hist")
	bucketTS   = []byte("ts")
)

var stageBuckets = [numStages][]byte{[]byte("prompts"), []byte("raw"), []byte("tokenized"), []byte("errors")}

func u32key(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

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
