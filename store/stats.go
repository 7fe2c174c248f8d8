package store

import "strconv"

// Stats are the counters kept for one stage of one dataset. Every field is
// exact: updated in the transaction that adds or removes a record.
type Stats struct {
	Records uint64 `json:"records"`
	// Files is how many files of this stage have been indexed.
	Files uint64 `json:"files"`

	// Token sums over the records that carry the count.
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
	CachedTokens     uint64 `json:"cached_tokens"`
	ReasoningTokens  uint64 `json:"reasoning_tokens"`
	// Records without the count (never summed as 0).
	UnknownPrompt     uint64 `json:"unknown_prompt"`
	UnknownCompletion uint64 `json:"unknown_completion"`
	// ReasoningRecords counts the records that carry a reasoning count
	// (ReasoningTokens sums them); it starts at 0 in a file written before
	// it was kept, and never goes below.
	ReasoningRecords uint64 `json:"reasoning_records,omitempty"`

	// Duplicates counts lines whose id was already indexed for this stage.
	Duplicates uint64 `json:"duplicates"`
	// Replaced counts answers a later answer of the same id replaced (a
	// redo: Tx.Replace); they are counted nowhere else.
	Replaced uint64 `json:"replaced,omitempty"`
	// Skipped counts the lines of this stage's files that were left out
	// (invalid JSON, no id, not storable): the sum of their
	// FileState.Skipped, kept in step by Tx.PutFile and Tx.ForgetFile.
	Skipped uint64 `json:"skipped,omitempty"`

	Finish map[string]uint64 `json:"finish,omitempty"`
	Shapes map[string]uint64 `json:"shapes,omitempty"`
	// ToolStops counts the records per Record.ToolStop reason: tool
	// conversations gen stopped where the model departed from the data
	// (absent in a file written before it, which has no such records).
	ToolStops map[string]uint64 `json:"tool_stops,omitempty"`
	// Samples counts the records per Record.Samples above 1 (the number
	// in decimal): the samples per prompt their lines name (Summary.Samples).
	Samples map[string]uint64 `json:"samples,omitempty"`

	// Speculative decoding, over the records that carry it (absent in a
	// file written before these counters, which has no such records):
	// SpecRecords counts records with a verify count (Record.HasSpec);
	// SpecTokens and SpecVerify sum completion tokens and verify steps over
	// those of them that also have a completion count, so SpecTokens /
	// SpecVerify is the accept length; SpecAccepted and SpecProposed sum
	// the draft counts over the records that carry them (HasDrafts), so
	// their ratio is the accept rate.
	SpecRecords  uint64 `json:"spec_records,omitempty"`
	SpecTokens   uint64 `json:"spec_tokens,omitempty"`
	SpecVerify   uint64 `json:"spec_verify,omitempty"`
	SpecAccepted uint64 `json:"spec_accepted,omitempty"`
	SpecProposed uint64 `json:"spec_proposed,omitempty"`
}

// UnknownSpec is the number of records without speculative decoding
// counts: Records − SpecRecords (so a file written before the spec
// counters reads as all unknown).
func (s *Stats) UnknownSpec() uint64 { return s.Records - s.SpecRecords }

// Overlap counts ids present in several stages of one dataset: units
// (UnitID) in a dataset of several samples per prompt, a unit being in
// the prompts stage when its prompt is (store/doc.go).
type Overlap struct {
	// Answered is |prompts ∩ (raw ∪ errors)|: prompts that have an outcome,
	// an answer or a final error (Summary.Answers counts the answers).
	Answered uint64 `json:"answered"`
	// ErrorsOpen is |errors \ raw|: failures not answered since.
	ErrorsOpen uint64 `json:"errors_open"`
	// Failed is |prompts ∩ errors \ raw|: prompts that failed for good
	// and have no answer since (ErrorsOpen less the errors whose prompt is
	// gone). A summary written before the counter is recounted when read
	// (failedCounted).
	Failed uint64 `json:"failed"`
	// RawTokenized is |raw ∩ tokenized|.
	RawTokenized uint64 `json:"raw_tokenized"`
	// RawExcluded is |raw ∩ excluded \ tokenized|: answers export left
	// out, with a reason, and did not tokenize since. (A file written
	// before schema 4 has no excluded records, so the counter it lacks is
	// rightly 0.)
	RawExcluded uint64 `json:"raw_excluded,omitempty"`
	// RawNoPrompt is |raw \ prompts|: answers whose id matches no prompt
	// (their prompts were indexed under another id rule, or are gone),
	// known when NoPromptKnown: a file written before the counter was
	// kept lacks it until its dataset's next write counts it (Tx).
	RawNoPrompt   uint64 `json:"raw_no_prompt,omitempty"`
	NoPromptKnown bool   `json:"no_prompt_known,omitempty"`
}

// NoPrompt is the number of the dataset's answers whose id matches no
// prompt (Overlap.RawNoPrompt); ok is false when the index does not know
// it yet.
func (s Summary) NoPrompt() (n uint64, ok bool) {
	return s.Overlap.RawNoPrompt, s.Overlap.NoPromptKnown
}

// Summary is everything counted for one dataset.
type Summary struct {
	Dataset string           `json:"-"`
	Stages  [numStages]Stats `json:"stages"`
	Overlap Overlap          `json:"overlap"`
	Pending Pending          `json:"pending"`
	// Done counts, per k of 2 or more (in decimal), the prompts k of whose
	// units (UnitID) have an answer or a final error: absent while no
	// prompt has two, as in every dataset of one sample per prompt.
	Done map[string]uint64 `json:"done,omitempty"`
	// Asked is the samples per prompt the last gen run over the dataset
	// asks (gen --samples N, N of 2 or more; 0: one, or no gen run),
	// recorded as it starts (Tx.AskSamples), so every reader counts them
	// before an answer names them. A fresh index of the files knows N
	// only from the answers.
	Asked uint64 `json:"asked,omitempty"`
	// asked is the samples per prompt a caller knows the dataset asks
	// beyond its records (Ask).
	asked uint64
}

// Ask makes s count n samples per prompt when its records name fewer:
// gen --samples N, before its first answers are in.
func (s *Summary) Ask(n int) { s.asked = uint64(max(n, 0)) }

// AskSamples records that a gen run asks n samples per prompt of dataset
// (Summary.Asked; n of 1 or less clears it): a run with no answers yet
// may ask another N than the last, so each run records its own.
func (tx *Tx) AskSamples(dataset string, n int) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	d.sum.Asked = 0
	if n > 1 {
		d.sum.Asked = uint64(n)
	}
	return nil
}

// Stage returns the counters of one stage.
func (s Summary) Stage(st Stage) Stats { return s.Stages[st] }

// Skipped is the number of lines of the dataset's files, every stage,
// that were left out of the index.
func (s Summary) Skipped() uint64 {
	var n uint64
	for _, st := range s.Stages {
		n += st.Skipped
	}
	return n
}

// The reasons gen stops a tool conversation where the model departed from
// the data (a raw line's "tool_stop" reason, Record.ToolStop): the model
// called another tool than the one whose result comes next, made more
// calls than the data has results left, answered in text where the data
// called, or made a call whose arguments are not a JSON object.
const (
	ToolStopOtherTool = "other_tool"
	ToolStopMoreCalls = "more_calls"
	ToolStopNoCall    = "no_call"
	ToolStopBadArgs   = "bad_arguments"
)

// ToolStopReasons are the tool stop reasons, in the order gendex shows them.
var ToolStopReasons = []string{ToolStopOtherTool, ToolStopMoreCalls, ToolStopNoCall, ToolStopBadArgs}

// ToolStops is the number of the dataset's answers that are tool
// conversations gen stopped where the model departed from the data
// (Stats.ToolStops of its raw stage, every reason).
func (s Summary) ToolStops() uint64 {
	var n uint64
	for _, c := range s.Stages[Raw].ToolStops {
		n += c
	}
	return n
}

// Answers is the number of units (a prompt's samples; its prompt, with
// one sample per prompt) with an answer: Answered less Failed.
func (s Summary) Answers() uint64 {
	return s.Overlap.Answered - min(s.Overlap.Failed, s.Overlap.Answered)
}

// MissingRaw is the number of units (a prompt's samples, Samples of each)
// with neither a response nor an error.
func (s Summary) MissingRaw() uint64 {
	return s.Units() - min(s.Overlap.Answered, s.Units())
}

// Samples is how many samples per prompt the dataset asks for: the
// largest count its records' lines name (Stats.Samples), its last gen
// run asked (Asked) or Ask gave, 1 when none does.
func (s Summary) Samples() uint64 {
	n := max(s.asked, s.Asked, 1)
	for _, st := range s.Stages {
		for k, c := range st.Samples {
			if v, err := strconv.ParseUint(k, 10, 32); err == nil && c > 0 {
				n = max(n, v)
			}
		}
	}
	return n
}

// Units is the number of answers the dataset's prompts ask for: prompts
// times Samples.
func (s Summary) Units() uint64 { return s.Stages[Prompts].Records * s.Samples() }

// PromptsDone is the number of prompts every sample of which has an
// answer or a final error (Summary.Done; with one sample, Answered).
func (s Summary) PromptsDone() uint64 {
	n := s.Samples()
	if n == 1 {
		return s.Overlap.Answered
	}
	var done uint64
	for k, c := range s.Done {
		if v, err := strconv.ParseUint(k, 10, 32); err == nil && v >= n {
			done += c
		}
	}
	return done
}

// MissingTokenized is the number of responses with neither a tokenized
// record nor an exclusion, and those whose record or exclusion was built
// from an answer a redo replaced since (Pending.Stale): raw −
// RawTokenized − RawExcluded + Stale. So raw == tokenized + Excluded() +
// MissingTokenized() − Stale whenever every tokenized id has a response.
func (s Summary) MissingTokenized() uint64 {
	return s.Stages[Raw].Records - s.Overlap.RawTokenized - s.Overlap.RawExcluded + min(s.Pending.Stale, s.Overlap.RawTokenized+s.Overlap.RawExcluded)
}

// Excluded is the number of responses left out of the training records
// with a reason and not tokenized since (Overlap.RawExcluded). An
// exclusion without a response, or of an id tokenized after all, is not
// counted: the excluded stage's Records counts every exclusion line.
func (s Summary) Excluded() uint64 { return s.Overlap.RawExcluded }

// membership is a bit set of the stages an id is in.
type membership uint8

func (m membership) has(s Stage) bool { return m&(1<<s) != 0 }

// overlapOf evaluates the Overlap predicates for one id: each field is 0
// or 1.
func overlapOf(m membership) Overlap {
	p, r, e, t, x := m.has(Prompts), m.has(Raw), m.has(Errors), m.has(Tokenized), m.has(Excluded)
	return Overlap{
		Answered:     one(p && (r || e)),
		ErrorsOpen:   one(e && !r),
		Failed:       one(p && e && !r),
		RawTokenized: one(r && t),
		RawExcluded:  one(r && x && !t),
		RawNoPrompt:  one(r && !p),
	}
}

func one(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// apply adjusts o by the change of one id's membership from before to
// after. Every counter moves by -1, 0 or +1 (unsigned wrap subtracts).
func (o *Overlap) apply(before, after membership) {
	b, a := overlapOf(before), overlapOf(after)
	o.Answered += a.Answered - b.Answered
	o.ErrorsOpen += a.ErrorsOpen - b.ErrorsOpen
	o.Failed += a.Failed - b.Failed
	o.RawTokenized += a.RawTokenized - b.RawTokenized
	o.RawExcluded += a.RawExcluded - b.RawExcluded
	o.RawNoPrompt += a.RawNoPrompt - b.RawNoPrompt
}

func (s *Stats) add(r *Record, sign int) {
	d := uint64(sign) // wraps to subtract when sign is -1
	s.Records += d
	if r.PromptTokens >= 0 {
		s.PromptTokens += d * uint64(r.PromptTokens)
	} else {
		s.UnknownPrompt += d
	}
	if r.CompletionTokens >= 0 {
		s.CompletionTokens += d * uint64(r.CompletionTokens)
	} else {
		s.UnknownCompletion += d
	}
	if r.CachedTokens >= 0 {
		s.CachedTokens += d * uint64(r.CachedTokens)
	}
	if r.ReasoningTokens >= 0 {
		s.ReasoningTokens += d * uint64(r.ReasoningTokens)
		// A record of a file indexed before ReasoningRecords was kept
		// was never counted in it: removing it leaves the count at 0.
		if sign > 0 || s.ReasoningRecords > 0 {
			s.ReasoningRecords += d
		}
	}
	s.Finish = bump(s.Finish, r.Finish, d)
	s.Shapes = bump(s.Shapes, r.Shape.String(), d)
	s.ToolStops = bump(s.ToolStops, r.ToolStop, d)
	if r.Samples > 1 {
		s.Samples = bump(s.Samples, strconv.FormatUint(uint64(r.Samples), 10), d)
	}
	if r.HasSpec() {
		s.SpecRecords += d
		if r.CompletionTokens >= 0 {
			s.SpecTokens += d * uint64(r.CompletionTokens)
			s.SpecVerify += d * uint64(r.SpecVerify)
		}
	}
	if r.HasDrafts() {
		s.SpecAccepted += d * uint64(r.SpecAccepted)
		s.SpecProposed += d * uint64(r.SpecProposed)
	}
}

func bump(m map[string]uint64, k string, d uint64) map[string]uint64 {
	if k == "" {
		return m
	}
	if m == nil {
		m = make(map[string]uint64)
	}
	m[k] += d
	if m[k] == 0 {
		delete(m, k)
	}
	return m
}
