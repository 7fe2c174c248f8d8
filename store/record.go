package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Stage is the pipeline step a record belongs to.
type Stage uint8

// The stages, in pipeline order.
const (
	Prompts Stage = iota
	Raw
	Tokenized
	Errors
	// Turns holds the answers to the earlier user turns of multi-turn
	// conversations (gen --turns all), keyed TurnID(id, turn); the
	// conversation's Raw record is added only with its last turn.
	Turns
	// Excluded holds the answers export left out of the tokenized stage,
	// with the reason in Finish and the detail in Message.
	Excluded
	numStages
)

var stageNames = [numStages]string{"prompts", "raw", "tokenized", "errors", "turns", "excluded"}

func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// Stages returns every stage, in pipeline order.
func Stages() []Stage {
	out := make([]Stage, numStages)
	for i := range out {
		out[i] = Stage(i)
	}
	return out
}

// StageNames returns the name of every stage, in pipeline order.
func StageNames() []string { return append([]string(nil), stageNames[:]...) }

// ParseStage reads a stage name as written on the command line.
func ParseStage(name string) (Stage, error) {
	for i, n := range stageNames {
		if n == name {
			return Stage(i), nil
		}
	}
	return 0, fmt.Errorf("unknown stage %q (want prompts, raw, tokenized, errors, turns or excluded)", name)
}

// Shape says which input format a record was read from.
type Shape uint8

// The shapes the ingest normalizer recognises.
const (
	ShapeUnknown   Shape = iota // no token count anywhere
	ShapeFlat                   // gendex / seed flat: completion_tokens at top level
	ShapeSGLang                 // SGLang /generate: meta_info.*
	ShapeOpenAI                 // OpenAI chat/completions: usage.*
	ShapeBatch                  // OpenAI Batch / vLLM run-batch: response.body.usage.*
	ShapeIDsOnly                // len(output_ids)
	ShapePrompt                 // a prompt line
	ShapeTokenized              // a tokenized training record
	ShapeError                  // a failed request
	ShapeExcluded               // an answer left out of the training records, with its reason
	numShapes
)

var shapeNames = [numShapes]string{"unknown", "flat", "sglang", "openai", "batch", "ids_only", "prompt", "tokenized", "error", "excluded"}

func (s Shape) String() string {
	if s < numShapes {
		return shapeNames[s]
	}
	return fmt.Sprintf("shape(%d)", uint8(s))
}

// Unknown marks a count the record does not carry. It is never summed as 0.
const Unknown int64 = -1

// Record is what the index keeps of one JSONL line.
type Record struct {
	ID    string
	Shape Shape

	// Token counts, or Unknown.
	PromptTokens, CompletionTokens, CachedTokens, ReasoningTokens int64

	// Speculative decoding (SGLang's spec_* fields), 0 when the answer
	// carries none: SpecVerify is spec_verify_ct, the verify steps the
	// answer took (SGLang writes it only when it is above 0, so 0 is never
	// a count); SpecAccepted and SpecProposed are the draft tokens accepted
	// and proposed, a pair kept only when SpecProposed is above 0. See
	// Record.HasSpec and HasDrafts.
	SpecVerify, SpecAccepted, SpecProposed int64

	// Finish is the finish reason ("stop", "length", ...); for error records,
	// the failure reason ("http 400", "context_length_exceeded", ...).
	Finish string
	// Message is an error record's server message, stored shortened to
	// 512 bytes at a character boundary.
	Message string

	// Time is when the response finished, in Unix milliseconds: the record's
	// own timestamp, or the moment it was indexed when it has none.
	Time int64
	// OwnTime reports whether Time came from the record itself.
	OwnTime bool

	// Where the line lives: file id (see View.FilePath), byte offset and
	// length (without the newline), and 1-based line number.
	File   uint32
	Offset int64
	Length int64
	Line   int64
	// Sum is LineSum of the line, so a reader can tell the file still holds it.
	Sum uint32

	// ToolStop is the reason gen stopped a tool conversation where the
	// model departed from the data (the line's "tool_stop" reason:
	// "other_tool", "more_calls", "no_call", "bad_arguments"), "" for an
	// answer that did not stop so.
	ToolStop string

	// Maker is which of its file's makers (FileState.Makers) made the
	// answer, counted from 1; 0 for a record of another stage, or one
	// indexed before the index kept it (its maker is unknown).
	Maker uint32

	// From is, for a training record or an exclusion that names the answer
	// it was built from (its line's "answer_sum", written by export), that
	// answer line's LineSum; HasFrom says the line names one (a record of
	// an older gendex does not). A record whose From is not its id's
	// newest answer's Sum is stale (owed.go).
	From    uint32
	HasFrom bool

	// Samples is how many samples its prompt's dataset asks for, as the
	// line names them: max("samples", "sample"+1), 0 for a line that names
	// neither (one sample). Only a count above 1 is stored (Stats.Samples).
	Samples uint32
}

// cleanSpec makes r's spec counts what the index stores: a verify count
// out of range (not 1 to MaxTokens) is none, and so is a draft pair whose
// proposed count is out of range or whose accepted count is negative or
// above it. The counters are computed from the cleaned record, so they
// match what a later removal reads back.
func (r *Record) cleanSpec() {
	if r.SpecVerify < 0 || r.SpecVerify > MaxTokens {
		r.SpecVerify = 0
	}
	if r.SpecProposed <= 0 || r.SpecProposed > MaxTokens || r.SpecAccepted < 0 || r.SpecAccepted > r.SpecProposed {
		r.SpecAccepted, r.SpecProposed = 0, 0
	}
}

// HasSpec reports whether r carries a verify step count, and so counts
// in the dataset's spec counters (Stats.SpecRecords).
func (r *Record) HasSpec() bool { return r.SpecVerify > 0 }

// HasDrafts reports whether r carries its accepted and proposed draft
// counts.
func (r *Record) HasDrafts() bool { return r.SpecProposed > 0 }

// SpecBin is r's accept length, completion tokens / verify steps, in
// hundredths rounded half up (exact integer arithmetic): the bin of the
// dataset's accept length histogram. ok is false when r has no verify
// count or no completion count.
func (r *Record) SpecBin() (bin int64, ok bool) {
	if !r.HasSpec() || r.CompletionTokens < 0 {
		return 0, false
	}
	return (200*r.CompletionTokens + r.SpecVerify) / (2 * r.SpecVerify), true
}

// LineSum is a line's CRC-32C (hardware-accelerated), stored with its
// record so that show can tell the file still holds exactly that line.
func LineSum(line []byte) uint32 { return crc32.Checksum(line, castagnoli) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record encoding: a flags byte, then uvarints, then length-prefixed
// strings, then the speculative decoding counts when their bits are set.
// They come last, so a record written before they existed (no bits 6 and
// 7) decodes as having none, and a decoder that predates them reads the
// rest of a new record as it always did. The flags byte being full, what
// came later follows as an extension: a second flags byte (xFlags) and its
// fields, present only when one of them is set; a record that ends before
// it has none of them, and an older decoder ignores the bytes.
const (
	fPrompt = 1 << iota
	fCompletion
	fCached
	fReasoning
	fOwnTime
	fMessage
	fSpec   // SpecVerify follows the strings
	fDrafts // SpecAccepted and SpecProposed follow (after SpecVerify, if any)
)

// The extension's flags (see Record encoding).
const (
	xToolStop = 1 << iota // ToolStop follows, length-prefixed
	xMaker                // Maker follows, a uvarint (after ToolStop, if any)
	xFrom                 // From follows, 4 bytes big-endian (after Maker, if any)
	xSamples              // Samples follows, a uvarint above 1 (after From, if any)
)

const maxMessage = 512

func (r *Record) appendBinary(b []byte) []byte {
	var flags byte
	if r.PromptTokens >= 0 {
		flags |= fPrompt
	}
	if r.CompletionTokens >= 0 {
		flags |= fCompletion
	}
	if r.CachedTokens >= 0 {
		flags |= fCached
	}
	if r.ReasoningTokens >= 0 {
		flags |= fReasoning
	}
	if r.OwnTime {
		flags |= fOwnTime
	}
	if r.Message != "" {
		flags |= fMessage
	}
	if r.HasSpec() {
		flags |= fSpec
	}
	if r.HasDrafts() {
		flags |= fDrafts
	}
	b = append(b, flags, byte(r.Shape))
	for _, v := range [...]int64{r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.ReasoningTokens} {
		if v >= 0 {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	b = binary.AppendVarint(b, r.Time)
	b = binary.AppendUvarint(b, uint64(r.File))
	b = binary.AppendUvarint(b, uint64(r.Offset))
	b = binary.AppendUvarint(b, uint64(r.Length))
	b = binary.AppendUvarint(b, uint64(r.Line))
	b = binary.BigEndian.AppendUint32(b, r.Sum)
	b = binary.AppendUvarint(b, uint64(len(r.Finish)))
	b = append(b, r.Finish...)
	if r.Message != "" {
		m := Clip(r.Message, maxMessage)
		b = binary.AppendUvarint(b, uint64(len(m)))
		b = append(b, m...)
	}
	if flags&fSpec != 0 {
		b = binary.AppendUvarint(b, uint64(r.SpecVerify))
	}
	if flags&fDrafts != 0 {
		b = binary.AppendUvarint(b, uint64(r.SpecAccepted))
		b = binary.AppendUvarint(b, uint64(r.SpecProposed))
	}
	var x byte
	if r.ToolStop != "" {
		x |= xToolStop
	}
	if r.Maker > 0 {
		x |= xMaker
	}
	if r.HasFrom {
		x |= xFrom
	}
	if r.Samples > 1 {
		x |= xSamples
	}
	if x != 0 {
		b = append(b, x)
	}
	if r.ToolStop != "" {
		b = binary.AppendUvarint(b, uint64(len(r.ToolStop)))
		b = append(b, r.ToolStop...)
	}
	if r.Maker > 0 {
		b = binary.AppendUvarint(b, uint64(r.Maker))
	}
	if r.HasFrom {
		b = binary.BigEndian.AppendUint32(b, r.From)
	}
	if r.Samples > 1 {
		b = binary.AppendUvarint(b, uint64(r.Samples))
	}
	return b
}

var errCorrupt = errors.New("corrupt record")

// decodeRecord fills r (except ID) from its stored form.
func decodeRecord(b []byte, r *Record) error {
	if len(b) < 2 {
		return errCorrupt
	}
	flags := b[0]
	r.Shape = Shape(b[1])
	b = b[2:]
	uv := func() int64 {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > math.MaxInt64 { // no stored number is negative
			b = nil
			return 0
		}
		b = b[n:]
		return int64(v)
	}
	opt := func(bit byte) int64 {
		if flags&bit == 0 {
			return Unknown
		}
		return uv()
	}
	r.PromptTokens = opt(fPrompt)
	r.CompletionTokens = opt(fCompletion)
	r.CachedTokens = opt(fCached)
	r.ReasoningTokens = opt(fReasoning)
	t, n := binary.Varint(b)
	if n <= 0 {
		return errCorrupt
	}
	b = b[n:]
	r.Time = t
	r.OwnTime = flags&fOwnTime != 0
	r.File = uint32(uv())
	r.Offset = uv()
	r.Length = uv()
	r.Line = uv()
	if len(b) < 4 {
		return errCorrupt
	}
	r.Sum = binary.BigEndian.Uint32(b)
	b = b[4:]
	str := func() string {
		n := uv()
		if b == nil || n < 0 || n > int64(len(b)) {
			b = nil
			return ""
		}
		s := string(b[:n])
		b = b[n:]
		return s
	}
	r.Finish = str()
	r.Message = ""
	if flags&fMessage != 0 {
		r.Message = str()
		if len(r.Message) > maxMessage { // never written so long
			return errCorrupt
		}
	}
	r.SpecVerify, r.SpecAccepted, r.SpecProposed = 0, 0, 0
	if flags&fSpec != 0 {
		if r.SpecVerify = uv(); r.SpecVerify == 0 && b != nil { // never written as 0
			return errCorrupt
		}
	}
	if flags&fDrafts != 0 {
		r.SpecAccepted = uv()
		if r.SpecProposed = uv(); r.SpecProposed == 0 && b != nil {
			return errCorrupt
		}
	}
	r.ToolStop, r.Maker, r.From, r.HasFrom, r.Samples = "", 0, 0, false, 0
	if len(b) > 0 { // the extension
		x := b[0]
		b = b[1:]
		if x&xToolStop != 0 {
			if r.ToolStop = str(); r.ToolStop == "" && b != nil { // never written empty
				return errCorrupt
			}
		}
		if x&xMaker != 0 {
			if m := uv(); m > 0 && m <= math.MaxUint32 {
				r.Maker = uint32(m)
			} else if b != nil { // never written as 0
				return errCorrupt
			}
		}
		if x&xFrom != 0 {
			if len(b) < 4 {
				return errCorrupt
			}
			r.From, r.HasFrom = binary.BigEndian.Uint32(b), true
			b = b[4:]
		}
		if x&xSamples != 0 {
			if n := uv(); n > 1 && n <= MaxSamples {
				r.Samples = uint32(n)
			} else if b != nil { // never written so
				return errCorrupt
			}
		}
	}
	if b == nil {
		return errCorrupt
	}
	return nil
}
