package gen

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"gendex/ingest/gen/client"
	"gendex/store"
)

// Samples (--samples N): each prompt is asked N times, and each answer,
// a unit (store.UnitID), is asked exactly once through kills, resumes and
// shards, as one prompt's answer is without it: the feeder makes one job
// per unit not answered nor failed for good (toSend, per sample), every
// line gen writes for a unit (answer, turn, error, training record) names
// it with "sample" and "samples" (unitLine), so the index keys it by its
// unit, its turns by the unit's key with "#i", and a fresh ingest of the
// files finds the same units; the mix draw takes the sample (mix.go). A
// run with another N than the answers already made is refused
// (checkSamples, and the provenance's "samples"). --redo truncated asks
// each cut unit again, its own (toSendUnits: a redo flag per unit; the
// marks of the answers asked again are unit keys); --redo FILE asks
// every sample of a listed id, or the one sample a line names (query
// missing's sample column; unitEntry, unitKeys).
//
// One request per unit, never one with SGLang's sampling_params.n (or
// OpenAI's n): the N answers of such a request come back as one list,
// and its failure fails all N, where a unit's own request is retried,
// failed, written and indexed alone, so exactly-once stays per unit.

// sampleSeed gives sample s of a prompt a seed of its own when its request
// carries one (--seed, or the prompt's own sampling_seed): the seed plus
// s. One seed for all N would make a seeded server (SGLang's
// sampling_seed) answer the N samples alike; seed + s keeps them apart
// and each the same again on a resume or redo. Sample 0 keeps the seed as
// given, so one sample per prompt sends what it always did.
func sampleSeed(sp *client.SamplingParams, p *Prompt) {
	if p.Sample > 0 && sp.SamplingSeed != nil {
		s := *sp.SamplingSeed + int64(p.Sample)
		sp.SamplingSeed = &s
	}
}

// sampleSeedRule is sampleSeed as the provenance's "gen" part says it
// ("sample_seed"), in a run of several samples per prompt: the seed in
// "sampling" (or a prompt's own) is sample 0's, sample s is sent it + s.
const sampleSeedRule = "sampling_seed + sample"

// GreedyNote is what gen says once, before it starts, when a run of
// several samples per prompt may ask some of them greedily (temperature
// 0), where a server answers a prompt's samples alike: --temperature 0
// (a seed does not part greedy answers), --mix temperature with a part
// of 0 (the samples that draw it), or no temperature at all (the
// server's default decides, which gen cannot know). "" when none of
// these holds: one sample, or a temperature above 0 for every answer. A
// note, not a refusal: N greedy answers measure a server's determinism.
func (c *Config) GreedyNote() string {
	n := c.samples()
	if n <= 1 {
		return ""
	}
	for _, m := range c.Mix {
		if m.Key != "temperature" {
			continue
		}
		zero := 0.0
		for _, p := range m.parts {
			if v, ok := p.value.(float64); ok && !p.uniform && v == 0 {
				zero += p.weight
			}
		}
		if zero == 0 {
			return ""
		}
		return fmt.Sprintf("gen: --samples %d with --mix temperature=%s: the answers that draw 0 (%.0f%%) are greedy, so a prompt's samples that draw it are answered alike", n, m.Spec, 100*zero)
	}
	switch t := c.Sampling.Temperature; {
	case t == nil:
		return fmt.Sprintf("gen: --samples %d without --temperature: the server's default (or a prompt's own) decides; where it is 0 (greedy) a prompt's %d samples are answered alike: give --temperature 1.0 (or --mix temperature=...) to sample them apart", n, n)
	case *t == 0:
		return fmt.Sprintf("gen: --samples %d with --temperature 0: greedy decoding answers a prompt's %d samples alike (a seed does not part them); give --temperature 1.0 (or --mix temperature=...) to sample them apart", n, n)
	}
	return ""
}

// samples is the run's samples per prompt: 1 unless --samples says more.
func (c *Config) samples() int { return max(c.Samples, 1) }

// unitKey is the index's key of the unit p is: its id, and its sample
// when above 0.
func (p *Prompt) unitKey() string { return store.UnitID(p.ID, p.Sample) }

// unitName names p's unit in a message: its id, and "sample S" after it
// for a sample above 0.
func (p *Prompt) unitName() string {
	if p.Sample > 0 {
		return fmt.Sprintf("%s sample %d", p.ID, p.Sample)
	}
	return p.ID
}

// forSample is a copy of p, the prompt read once, as the job of its
// sample s of n: its slices are its own, so that no two jobs share one.
func (p *Prompt) forSample(s, n int) *Prompt {
	q := *p
	q.Sample, q.Samples = s, n
	q.InputIDs, q.Messages, q.chat, q.open = slices.Clone(p.InputIDs), slices.Clone(p.Messages), slices.Clone(p.chat), slices.Clone(p.open)
	return &q
}

// unitLine names the unit p in line, a JSON object gen writes for it:
// "sample" and "samples" first, when the run asks more than one sample;
// the line is left as it is otherwise (a run of one sample writes what
// it always did).
func unitLine(p *Prompt, line []byte) []byte {
	if p == nil || p.Samples <= 1 || len(line) == 0 || line[0] != '{' {
		return line
	}
	head := `{"sample":` + strconv.Itoa(p.Sample) + `,"samples":` + strconv.Itoa(p.Samples) + `,`
	out := make([]byte, 0, len(line)+len(head))
	out = append(out, head...)
	return append(out, line[1:]...)
}

// summary is the index's counters of ds, counting the run's samples per
// prompt before its answers name them (store.Summary.Ask).
func (ds *dsRun) summary(v *store.View) (store.Summary, error) {
	s, err := v.Summary(ds.Name)
	s.Ask(ds.samples)
	return s, err
}

// unitsText is a dataset's counts with more than one sample per prompt:
// "1200/3000 prompts done (every sample), 5310/12000 answers" (an answer
// of a redo asks again not counted); failed and to go count answers.
func unitsText(s store.Summary, o store.Owed) string {
	return fmt.Sprintf("%d/%d prompts done (every sample), %d/%d answers", s.PromptsDone(), s.Stage(store.Prompts).Records, min(o.Answered, s.Units()), s.Units())
}

// unitParts is doneParts for a dataset of more than one sample per
// prompt: its prompts done and its answers (unitsText), then its failed
// answers and those to go.
func unitParts(s store.Summary, o store.Owed) liveLine {
	prompts, units := s.Stage(store.Prompts).Records, s.Units()
	l := liveLine{
		{text: fmt.Sprintf(" %d/%d prompts done (every sample)", s.PromptsDone(), prompts), short: fmt.Sprintf(" %d/%d prompts", s.PromptsDone(), prompts)},
		{text: fmt.Sprintf(", %d/%d answers", min(o.Answered, units), units), short: fmt.Sprintf(", %d/%d ans", min(o.Answered, units), units), drop: 4},
	}
	if o.Failed > 0 {
		l = append(l, part{text: fmt.Sprintf(", %d failed", o.Failed), short: fmt.Sprintf(", %d fail", o.Failed), drop: 2})
	}
	return append(l, part{text: fmt.Sprintf(", %d to go", min(o.ToGo(), units)), drop: 5})
}

// checkSamples refuses a run whose samples per prompt are not those of
// the answers ds already holds (s, its counters as the records say:
// their lines' "samples"), before anything is sent: fewer would leave
// samples owed that no run of it asks, more would make the dataset two
// runs'. Not even --allow-mixed lets it through.
func (ds *dsRun) checkSamples(s store.Summary) error {
	had := s.Samples()
	if s.Stage(store.Raw).Records+s.Stage(store.Errors).Records == 0 || had == uint64(ds.samples) {
		return nil
	}
	return &stopError{msg: fmt.Sprintf("%s holds answers made with --samples %d (their lines' \"samples\"); this run asks --samples %d",
		filepath.Dir(ds.Raw), had, ds.samples),
		hint: fmt.Sprintf("give --samples %d to go on with the dataset, or --out DIR for a run of its own; nothing was sent", had)}
}

// unitEntry reads a --redo FILE line of two fields as query missing's
// bare (id, sample) when the run asks several samples, its first field
// names none of the run's datasets and its second is a sample number
// (DATASET<TAB>ID otherwise, as without --samples).
func (rc *redoChooser) unitEntry(e redoEntry, byName map[string]*dsRun) redoEntry {
	if n := rc.cfg.samples(); n > 1 && e.dataset != "" && e.sample < 0 && byName[e.dataset] == nil {
		if s, err := strconv.Atoi(e.id); err == nil && s >= 0 && s < n {
			return redoEntry{line: e.line, id: e.dataset, sample: s}
		}
	}
	return e
}

// unitKeys is the unit keys a --redo FILE entry asks again: its sample's,
// or every sample's of its id.
func (rc *redoChooser) unitKeys(e redoEntry) []string {
	if e.sample >= 0 {
		return []string{store.UnitID(e.id, e.sample)}
	}
	keys := make([]string, rc.cfg.samples())
	for s := range keys {
		keys[s] = store.UnitID(e.id, s)
	}
	return keys
}
