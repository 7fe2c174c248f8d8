package query

import "gendex/store"

// acceptSpan makes a server's accept length over a span of its samples
// (query server's window, a row of series --servers): the figure for
// those seconds, never the last sample's. It sums, over each pair of
// consecutive samples, in this order of preference:
//   - the server's own counters (vLLM's and llama.cpp's
//     spec_decode_num_accepted_tokens and spec_decode_num_drafts): the
//     accept length is 1 + Δaccepted / Δdrafts, each increase taken by
//     counterIncrease, so that a restart inside the span (a counter lower
//     than before, or another process start time) adds the counter's new
//     value instead of a negative jump; and a server whose process started
//     in the span (process_start_time_seconds, which vLLM's /metrics has)
//     counts its first sample's counters whole, so that a run shorter
//     than one scrape interval is not lost;
//   - gen's own counts of the answers that carry SGLang's per-request
//     spec_verify_ct (/metrics has no such counters, only a gauge of its
//     last interval): Σ completion tokens / Σ verify steps, over the pairs
//     of one gen run, and the whole count of a run that began in the span;
//   - SGLang's gauge sglang:spec_accept_length, when no answer carried the
//     counts (the chat endpoint sends no meta_info): each pair's generated
//     tokens over the verify steps the gauge gives them (Δgen / gauge), so
//     the span's figure is Σ Δgen / Σ (Δgen / gauge), as the per-request
//     rule weighs answers, not the mean of the samples.
//
// Unknown when none of them has a draft or a verify step in the span.
type acceptSpan struct {
	accepted, drafts        float64 // server counters' increases
	specTokens, specSteps   int64   // gen's counts
	gaugeTokens, gaugeSteps float64
}

// add adds sample s of one server, and the pair it closes with prev, the
// sample before it (when havePrev). from is the span's start (Unix ms): a
// run that began then or later has all its counts in the span.
func (a *acceptSpan) add(s, prev *store.ServerSample, havePrev bool, from int64) {
	switch {
	case havePrev && prev.Run == s.Run:
		a.specTokens += max(s.ClientSpecTokens-prev.ClientSpecTokens, 0)
		a.specSteps += max(s.ClientSpecVerify-prev.ClientSpecVerify, 0)
	case s.Run >= from: // the run began in the span: all its counts are in it
		a.specTokens += s.ClientSpecTokens
		a.specSteps += s.ClientSpecVerify
	}
	if !s.Scraped {
		return
	}
	// whole: s is the first sample of a server process that started in the
	// span (its process_start_time_seconds after the span's start and after
	// the sample before, which so never saw it): every count it has is the
	// span's, as after a restart.
	whole := false
	if t1, ok := s.Get(store.MetricStartTime); ok {
		switch {
		case !havePrev:
			whole = t1*1000 >= float64(from)
		case !prev.Scraped:
			whole = t1*1000 >= float64(max(from, prev.Time))
		}
	}
	pair := havePrev && prev.Scraped
	if !pair && !whole {
		return
	}
	restarted := whole
	if t0, ok := prev.Get(store.MetricStartTime); ok && pair {
		if t1, ok := s.Get(store.MetricStartTime); ok && t1 != t0 {
			restarted = true
		}
	}
	increase := func(m store.Metric) (float64, bool) {
		y, ok := s.Get(m)
		if !ok {
			return 0, false
		}
		if restarted {
			return y, true
		}
		x, ok := prev.Get(m)
		if !ok {
			return 0, false
		}
		return counterIncrease(x, y), true
	}
	acc, ok1 := increase(store.MetricSpecAccepted)
	drafts, ok2 := increase(store.MetricSpecDrafts)
	if ok1 && ok2 {
		a.accepted += acc
		a.drafts += drafts
	}
	if g, ok := s.Get(store.MetricAcceptLength); ok && g >= 1 && s.Flavor == store.FlavorSGLang {
		if gen, ok := increase(store.MetricGenTokens); ok && gen > 0 {
			a.gaugeTokens += gen
			a.gaugeSteps += gen / g
		}
	}
}

// value is the span's accept length, by the first rule that has data.
func (a *acceptSpan) value() (float64, bool) {
	switch {
	case a.drafts > 0:
		return 1 + a.accepted/a.drafts, true
	case a.specSteps > 0:
		return float64(a.specTokens) / float64(a.specSteps), true
	case a.gaugeSteps > 0:
		return a.gaugeTokens / a.gaugeSteps, true
	}
	return 0, false
}

// fixed is value as a column (2 decimals), or nil when unknown.
func (a *acceptSpan) fixed() any {
	if v, ok := a.value(); ok {
		return Fixed{v, 2}
	}
	return nil
}
