package query

import (
	"fmt"
	"math"
	"strings"
	"time"

	"gendex/store"
)

// noMetricsNote is what `server` says of a server without /metrics.
const noMetricsNote = "no /metrics (HTTP 404): start the server with --enable-metrics (a router or gateway in front serves none)"

// timeFormat is how questions print a moment: UTC, to the millisecond, as
// gen's answer lines write finished_at.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// serverList: one row per server gen has read (or tried to read) the
// /metrics of, from the samples whose second is in the window ending now
// ([now−window, now]):
//   - up is gen's view in the last sample (true: in rotation, false:
//     waited for; a table shows yes and no); running, queued, token_usage and cache_hit_rate are
//     the server's own, from the last sample, unknown when that reading
//     lacks them (the server was down, or does not report them);
//   - limit is gen's limit then on its requests in flight on the server
//     (the capacity gen found for it, or its share of --concurrency), and
//     in_flight gen's requests in flight on it, from the last sample;
//     both unknown when that sample does not keep them (a gen older than
//     the limit: store.ServerSample.Limit 0);
//   - preemptions is the increase of the server's preemption counter
//     (vLLM's num_preemptions_total, SGLang's retracted requests) over the
//     pairs of samples of one gen run in the window, as
//     server_tokens_per_s pairs them; unknown when no pair has it;
//   - accept_length is the window's, from the server's spec counters or
//     the answers' per-request counts (acceptSpan), unknown when nothing
//     was drafted in it;
//   - last_seen is the last time its /metrics answered, ever;
//   - server_tokens_per_s is the increase of its generation_tokens_total
//     counter between consecutive samples of one gen run, over the time
//     between them (a value lower than the one before is a restart: the
//     counter counts from 0 again, so the new value is the increase);
//   - client_tokens_per_s is gendex's own count of the completion tokens
//     that server returned, over the same pairs of samples (when the server
//     has no counter: over every pair of one run); unknown when an answer
//     in it had no count;
//   - agreement = client_tokens_per_s / server_tokens_per_s;
//   - retries counts gen's attempts on that server that failed and were
//     sent again (HTTP errors, timeouts, lost connections, aborts) within
//     the window: the increase of its count between samples of one gen
//     run, and all of a run's that began in the window; in_backoff is the
//     prompts waiting then to be sent again, from the last sample; both
//     unknown without a sample in the window;
//   - last_error and last_error_at are the last retried attempt's error,
//     briefly ("HTTP 500 'Failed to parse input'"), and when it was, as the
//     last sample in the window has them ("" when none failed in that run).
//
// A server gen found stalled (store.ServerSample.Stalled) is not up and
// its note says so. Nothing unknown is shown as 0. note says why a
// server's columns are unknown: no /metrics (with how to turn them on), no sample in the
// window, or what its flavor's /metrics does not expose (serverflavor.go).
// The columns mean the same for SGLang, vLLM and llama.cpp (README's table
// names each one's metric).
func serverList(v *store.View, q Query, now time.Time, out Sink) error {
	names, err := servers(v, q.Servers)
	if err != nil {
		return err
	}
	var stale int
	if len(q.Servers) == 0 && !q.AllServers {
		names, stale, err = currentServers(v, names, now)
		if err != nil {
			return err
		}
	}
	out.Columns([]string{"server", "up", "running", "queued", "limit", "in_flight", "preemptions", "token_usage", "cache_hit_rate", "accept_length",
		"last_seen", "server_tokens_per_s", "client_tokens_per_s", "agreement", "retries", "in_backoff", "last_error", "last_error_at", "note"})
	to := now.Unix()
	from := to - max(1, int64(q.Window/time.Second))
	for _, name := range names {
		row, err := serverRow(v, name, from, to)
		if err != nil {
			return err
		}
		if err := out.Row(row); err != nil {
			return err
		}
	}
	if stale > 0 {
		if stale == 1 {
			return out.Note("1 server of an earlier run, not seen in the last hour, is not listed (--all-servers lists it)")
		}
		return out.Note(fmt.Sprintf("%d servers of earlier runs, not seen in the last hour, are not listed (--all-servers lists them)", stale))
	}
	return nil
}

// staleAfter is how long a server of an earlier run stays in the default
// views after its last sample.
const staleAfter = time.Hour

// currentServers keeps the servers of the last gen run (the newest
// sample's run) and those sampled in the last hour: a dry run's
// simulator or a mistyped port of last week leaves the default views. It
// returns how many it left out.
func currentServers(v *store.View, names []string, now time.Time) ([]string, int, error) {
	last := make([]store.ServerSample, len(names))
	var run int64
	for i, n := range names {
		s, ok, err := v.LastServerSample(n)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			last[i] = s
			run = max(run, s.Run)
		}
	}
	var keep []string
	for i, n := range names {
		if last[i].Run == run || now.Sub(time.UnixMilli(last[i].Time)) <= staleAfter {
			keep = append(keep, n)
		}
	}
	return keep, len(names) - len(keep), nil
}

// tokenSpan sums a token count's increase over pairs of samples.
type tokenSpan struct {
	tokens  float64
	unknown int64 // answers without a count (client only)
	ms      int64
}

func (t tokenSpan) perSecond() (float64, bool) {
	if t.ms <= 0 || t.unknown > 0 {
		return 0, false
	}
	return t.tokens / (float64(t.ms) / 1000), true
}

func serverRow(v *store.View, name string, from, to int64) ([]any, error) {
	var last, prev store.ServerSample
	var have, havePrev bool
	var server, clientPaired, clientAll tokenSpan
	var retries int64
	var accept acceptSpan
	var preempt counterSpan
	err := v.ServerSamples(name, from, to, func(s *store.ServerSample) error {
		accept.add(s, &prev, havePrev, from*1000)
		switch {
		case havePrev && prev.Run == s.Run:
			retries += max(s.Retries-prev.Retries, 0)
		case s.Run >= from*1000: // the run began in the window: all its retries are in it
			retries += s.Retries
		}
		if havePrev && prev.Run == s.Run && s.Time > prev.Time {
			ms := s.Time - prev.Time
			client := tokenSpan{float64(s.ClientTokens - prev.ClientTokens), s.ClientUnknown - prev.ClientUnknown, ms}
			clientAll.add(client)
			a, ok1 := prev.Get(store.MetricGenTokens)
			b, ok2 := s.Get(store.MetricGenTokens)
			if ok1 && ok2 {
				server.add(tokenSpan{counterIncrease(a, b), 0, ms})
				clientPaired.add(client)
			}
			preempt.add(&prev, s, store.MetricPreemptions)
		}
		prev, havePrev = *s, true
		last, have = *s, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	ever, everOK, err := v.LastServerSample(name)
	if err != nil {
		return nil, err
	}
	var up, lastSeen any
	note := "" // not an unknown: nothing to say
	if have {
		// A stalled server is not in rotation: gen sends it nothing new.
		up = last.Up && !last.Stalled
	}
	if everOK && ever.LastSeen > 0 {
		lastSeen = time.UnixMilli(ever.LastSeen).UTC().Format(timeFormat)
	}
	gauge := func(m store.Metric, prec int) any {
		if !have || !last.Scraped {
			return nil
		}
		x, ok := last.Get(m)
		if !ok {
			return nil
		}
		if prec < 0 {
			return uint64(math.Round(max(x, 0)))
		}
		return Fixed{x, prec}
	}
	var srvRate, cliRate, agreement any
	client := clientAll
	if s, ok := server.perSecond(); ok {
		srvRate = Fixed{s, 1}
		client = clientPaired
		if c, ok := client.perSecond(); ok && s > 0 {
			agreement = Fixed{c / s, 3}
		}
	}
	if c, ok := client.perSecond(); ok {
		cliRate = Fixed{c, 1}
	}
	switch {
	case have && last.Stalled:
		note = "stalled: it replies to none of the requests gen holds on it (gendex query events)"
	case everOK && ever.NoMetrics:
		note = noMetricsNoteOf(ever.Flavor)
	case !have:
		note = fmt.Sprintf("no reading in the last %ds (gen reads a server's /metrics while it runs)", to-from)
	case last.Scraped:
		note = unexposedNote(&last) // serverflavor.go
	}
	var retried, inBackoff, lastError, lastErrorAt any
	if have {
		retried, inBackoff, lastError = uint64(retries), uint64(max(last.InBackoff, 0)), last.LastError
		if last.LastErrorAt > 0 {
			lastErrorAt = time.UnixMilli(last.LastErrorAt).UTC().Format(timeFormat)
		}
	}
	limit, inFlight := limitCells(&last, have)
	return []any{name, up, gauge(store.MetricRunning, -1), gauge(store.MetricQueued, -1), limit, inFlight, preempt.count(),
		gauge(store.MetricTokenUsage, 3),
		gauge(store.MetricCacheHitRate, 3), accept.fixed(), lastSeen, srvRate, cliRate, agreement,
		retried, inBackoff, lastError, lastErrorAt, note}, nil
}

// limitCells are the limit and in_flight columns of a server whose last
// sample in the window is last (have: there is one): unknown, never 0,
// when the sample does not keep gen's limit (store.ServerSample.Limit 0).
func limitCells(last *store.ServerSample, have bool) (limit, inFlight any) {
	if !have || last.Limit <= 0 {
		return nil, nil
	}
	return uint64(last.Limit), uint64(max(last.InFlight, 0))
}

// counterSpan sums a server counter's increase over pairs of samples.
type counterSpan struct {
	sum   float64
	known bool // a pair had the counter at both ends
}

// add adds the counter m's increase from prev to s, when both have it.
func (c *counterSpan) add(prev, s *store.ServerSample, m store.Metric) {
	a, ok1 := prev.Get(m)
	b, ok2 := s.Get(m)
	if ok1 && ok2 {
		c.sum += counterIncrease(a, b)
		c.known = true
	}
}

// count is the sum as a column: unknown when no pair had the counter.
func (c counterSpan) count() any {
	if !c.known {
		return nil
	}
	return uint64(math.Round(max(c.sum, 0)))
}

func (t *tokenSpan) add(o tokenSpan) {
	t.tokens += o.tokens
	t.unknown += o.unknown
	t.ms += o.ms
}

// counterIncrease is a counter's increase from a to b: b − a, or b when b
// is lower (the server restarted and its counter began again at 0).
func counterIncrease(a, b float64) float64 {
	if b < a {
		return b
	}
	return b - a
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func dedupe(list []string) []string {
	var out []string
	for _, x := range list {
		if !containsString(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// servers checks the asked server names against those the index holds,
// or returns all of them when none are asked.
func servers(v *store.View, asked []string) ([]string, error) {
	names := v.Servers()
	if len(asked) == 0 {
		return names, nil
	}
	for _, n := range asked {
		if !containsString(names, n) {
			if len(names) == 0 {
				return nil, store.NotFound("no server %q: the index holds no server's metrics (gen reads them while it runs)", n)
			}
			return nil, store.NotFound("no server %q in the index (have: %s)", n, strings.Join(names, ", "))
		}
	}
	return dedupe(asked), nil
}
