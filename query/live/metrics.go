package live

import (
	"bytes"
	"net/http"
	"runtime"
	"time"

	"gendex/store"
	"gendex/store/prom"
)

// metrics writes Prometheus text: per dataset, records by stage (every
// stage, turns and excluded among them), token sums, open errors, records
// without a token count, missing answers, exclusions and answers not
// exported, the speculative decoding accept length (only for datasets
// whose answers carry it) and the answers that carry it; gen's limit on
// each server of its run (serverLimits); then the Extra samples, the serving process's goroutine count and the
// read transactions open for answers.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	// Written to memory inside the read transaction, sent after it.
	bw := &bytes.Buffer{}
	p := prom.NewWriter(bw)
	err := s.Src.View(func(v *store.View) error {
		var sums []store.Summary
		for _, name := range v.Datasets() {
			sm, err := v.Summary(name)
			if err != nil {
				return err
			}
			sums = append(sums, sm)
		}
		gauge := func(name, help string, each func(sm store.Summary) []sample) {
			p.Family(name, help, prom.Gauge)
			for _, sm := range sums {
				for _, x := range each(sm) {
					p.Uint(x.v, append([]string{"dataset", sm.Dataset}, x.labels...)...)
				}
			}
		}
		gauge("gendex_records", "Records indexed, by dataset and stage.", func(sm store.Summary) []sample {
			var out []sample
			for _, st := range store.Stages() {
				out = append(out, sample{[]string{"stage", st.String()}, sm.Stage(st).Records})
			}
			return out
		})
		one := func(f func(sm store.Summary) uint64) func(sm store.Summary) []sample {
			return func(sm store.Summary) []sample { return []sample{{nil, f(sm)}} }
		}
		gauge("gendex_prompt_tokens", "Prompt tokens of the responses that carry the count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).PromptTokens }))
		gauge("gendex_completion_tokens", "Completion tokens of the responses that carry the count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).CompletionTokens }))
		gauge("gendex_unknown_token_records", "Responses without a completion token count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).UnknownCompletion }))
		gauge("gendex_errors", "Prompts that failed for good and have no response since.", one(func(sm store.Summary) uint64 { return sm.Overlap.ErrorsOpen }))
		gauge("gendex_missing_raw", "Prompts (answers, one per sample, in a dataset of several samples per prompt) with neither a response nor a final error.", one(func(sm store.Summary) uint64 { return sm.MissingRaw() }))
		gauge("gendex_excluded", "Responses left out of the training records with a reason, and not tokenized since.", one(func(sm store.Summary) uint64 { return sm.Excluded() }))
		gauge("gendex_missing_tokenized", "Responses with neither a training record nor an exclusion, or with one built from an answer a redo replaced.", one(func(sm store.Summary) uint64 { return sm.MissingTokenized() }))
		gauge("gendex_redo", "Answers a redo is asking again and has not answered yet (to go, with gendex_missing_raw); no sample while the redo is still finding them (not known).", func(sm store.Summary) []sample {
			if sm.Pending.Choosing {
				return nil
			}
			return []sample{{nil, sm.Pending.Asking}}
		})
		// Accept length: no sample for a dataset whose answers carry no
		// speculative decoding counts (unknown is not 0).
		p.Family("gendex_accept_length", "Speculative decoding accept length: completion tokens per verify step, summed over the responses that carry SGLang's spec_verify_ct.", prom.Gauge)
		for _, sm := range sums {
			if r := sm.Stage(store.Raw); r.SpecVerify > 0 {
				p.Float(float64(r.SpecTokens)/float64(r.SpecVerify), "dataset", sm.Dataset)
			}
		}
		gauge("gendex_spec_records", "Responses that carry speculative decoding counts (spec_verify_ct).", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).SpecRecords }))
		return serverLimits(v, p, time.Now())
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.Extra != nil {
		s.Extra(p)
	}
	p.Family("gendex_goroutines", "Goroutines in the process that serves these metrics.", prom.Gauge)
	p.Int(int64(runtime.NumGoroutine()))
	p.Family("gendex_answer_transactions", "Read transactions open for answers being computed (answers are spooled first: a reader that stalls holds none).", prom.Gauge)
	p.Int(s.Answering())
	w.Header().Set("Content-Type", prom.ContentType)
	bw.WriteTo(w)
}

// limitFresh is how old a server's last sample may be for /metrics to
// give its limit: gen samples each server every few seconds while it
// runs, so an older one is of a run that is over (a limit no longer kept).
const limitFresh = time.Minute

// serverLimits writes gendex_server_limit: gen's limit on its requests in
// flight on each server, as its last sample of the server has it, for the
// servers of the newest gen run sampled within limitFresh of now. A
// server whose sample does not keep a limit (a gen older than the limit)
// has no sample: not known, not 0. The requests in flight themselves are
// gendex_in_flight, which gen writes live.
func serverLimits(v *store.View, p *prom.Writer, now time.Time) error {
	names := v.Servers()
	var last []store.ServerSample
	var run int64
	for _, name := range names {
		s, ok, err := v.LastServerSample(name)
		if err != nil {
			return err
		}
		if ok && now.Sub(time.UnixMilli(s.Time)) <= limitFresh {
			last = append(last, s)
			run = max(run, s.Run)
		} else {
			last = append(last, store.ServerSample{})
		}
	}
	p.Family("gendex_server_limit", "gen's limit on its requests in flight on a server "+
		"(the capacity it found, or its share of --concurrency; gendex_in_flight: those in flight), "+
		"as of its last sample of the server; no sample when not known.", prom.Gauge)
	for i, name := range names {
		if s := last[i]; s.Limit > 0 && s.Run == run {
			p.Int(s.Limit, "server", name)
		}
	}
	return nil
}

// sample is one value of a metrics family for a dataset, with the labels
// (name, value pairs) beside the dataset's.
type sample struct {
	labels []string
	v      uint64
}
