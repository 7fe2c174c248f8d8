package gen

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"gendex/store"
)

// rateWindow counts this run's answers per second, over the last minute,
// for the progress lines; it measures them by the store's rate model
// (store.RateSpan), the rule `query throughput` uses for the index.
type rateWindow struct {
	mu       sync.Mutex
	first    int64 // the second of the first answer, when hasFirst
	hasFirst bool
	secs     [64]struct{ sec, n, tokens, unknown int64 }
}

// progressWindow is the window progress rates are measured over; the ring
// keeps more seconds than that.
const progressWindow = 30 * time.Second

// add counts n answers with tokens completion tokens, unknown of which
// reported no token count. Tokens may come without answers: the earlier
// turns of conversations, whose answer (the conversation) comes with its
// last turn; the window starts with the first of either.
func (w *rateWindow) add(now time.Time, n, tokens, unknown int64) {
	sec := now.Unix()
	w.mu.Lock()
	if (n > 0 || tokens > 0) && !w.hasFirst {
		w.first, w.hasFirst = sec, true
	}
	b := &w.secs[sec%int64(len(w.secs))]
	if b.sec != sec {
		b.sec, b.n, b.tokens, b.unknown = sec, 0, 0, 0
	}
	b.n += n
	b.tokens += tokens
	b.unknown += unknown
	w.mu.Unlock()
}

// rate measures the answers of the window ending at now.
func (w *rateWindow) rate(now time.Time, window time.Duration) store.Rate {
	w.mu.Lock()
	defer w.mu.Unlock()
	var r store.Rate
	r.From, r.To = store.RateSpan(now, window, w.first, w.hasFirst)
	for _, b := range w.secs {
		if b.sec >= r.From && b.sec < r.To {
			r.Records += b.n
			r.Tokens += b.tokens
			r.Unknown += b.unknown
		}
	}
	return r
}

// tokenRate describes a token rate honestly: "unknown" when no answer
// reported a count, a lower bound when some did not.
func tokenRate(n, tokens, unknown int64, secs float64) string {
	switch {
	case n > 0 && unknown == n:
		return "tokens/s unknown"
	case unknown > 0:
		return fmt.Sprintf(">=%.0f tokens/s (%d answers without a token count)", float64(tokens)/secs, unknown)
	}
	return fmt.Sprintf("%.0f tokens/s", float64(tokens)/secs)
}

// liveLog is the log on a terminal: live status lines stay at the bottom,
// and anything else written first clears them (the next tick redraws them).
type liveLog struct {
	mu    sync.Mutex
	w     io.Writer
	drawn int // status lines on screen
}

func (l *liveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clear()
	return l.w.Write(p)
}

func (l *liveLog) clear() {
	if l.drawn > 0 {
		fmt.Fprintf(l.w, "\x1b[%dA\x1b[J", l.drawn)
		l.drawn = 0
	}
}

// draw replaces the status lines.
func (l *liveLog) draw(lines []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if l.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", l.drawn)
	}
	for _, s := range lines {
		b.WriteString("\x1b[2K" + s + "\n")
	}
	b.WriteString("\x1b[J")
	io.WriteString(l.w, b.String())
	l.drawn = len(lines)
}

// progress reports until stop is closed: live lines on a terminal, else a
// log line per dataset every LogEvery.
func (r *run) progress(stop <-chan struct{}) {
	every := r.cfg.LogEvery
	if r.live != nil {
		every = time.Second
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			if r.live != nil {
				r.live.mu.Lock()
				r.live.clear()
				r.live.mu.Unlock()
			}
			return
		case <-tick.C:
		}
		lines := r.statusLines(time.Now())
		if r.live != nil {
			r.live.draw(lines)
		} else {
			stamp := time.Now().Format(time.TimeOnly)
			for _, l := range lines {
				fmt.Fprintf(r.cfg.Log, "%s %s\n", stamp, l)
			}
		}
	}
}

// statusLines describes the run now: one line for the servers, one per
// dataset that is not finished (or was worked on in this run).
func (r *run) statusLines(now time.Time) []string {
	rates := make([]store.Rate, len(r.sets))
	for i, ds := range r.sets {
		rates[i] = ds.rate.rate(now, progressWindow)
	}
	all := store.TotalRate(now, progressWindow, rates)
	servers := fmt.Sprintf("%d/%d servers up", r.pool.upCount(), len(r.pool.servers))
	for _, s := range r.pool.servers {
		if !s.up.Load() {
			servers += fmt.Sprintf(", %s down %s", s.name, now.Sub(time.UnixMilli(s.downAt.Load())).Round(time.Second))
		}
	}
	sums := map[string]store.Summary{}
	var left uint64
	r.db.View(func(v *store.View) error {
		for _, ds := range r.sets {
			if s, err := v.Summary(ds.Name); err == nil {
				sums[ds.Name] = s
				left += s.MissingRaw()
			}
		}
		return nil
	})
	lines := []string{fmt.Sprintf("gen: %s, %d in flight%s, %.1f answers/s, %s (last %ds), %d to go, %s",
		servers, r.pool.inFlight(), r.pool.retriesLine(), all.PerSecond(), rateTokens(all), all.Seconds(), left, etaText(left, all))}
	lines = append(lines, r.withRetries(r.serverLines(now), now)...)
	for i, ds := range r.sets {
		s := sums[ds.Name]
		total := s.Stage(store.Prompts).Records
		done := total - s.MissingRaw()
		rate := rates[i]
		left := s.MissingRaw()
		if left == 0 && ds.ok.Load()+ds.failed.Load() == 0 {
			continue // finished before this run
		}
		errs := ""
		if n := s.Overlap.ErrorsOpen; n > 0 {
			errs = fmt.Sprintf(", %d errors", n)
		}
		errs += ds.turnsText() + truncatedText(s)
		if r.cfg.Export != nil {
			errs += exportText(s)
		}
		lines = append(lines, fmt.Sprintf("  %s %d/%d (%.1f%%)%s, %.1f answers/s, %s, %s",
			ds.Name, done, total, 100*float64(done)/float64(max(total, 1)), errs, rate.PerSecond(), rateTokens(rate), etaText(left, rate)))
	}
	return lines
}

// withRetries adds to the servers' lines (serverLines) what each server's
// retries are (retries.go): at the end of its line, or on a line of its
// own when it has none.
func (r *run) withRetries(lines []string, now time.Time) []string {
	for _, s := range r.pool.servers {
		text := serverRetries(s, now)
		if text == "" {
			continue
		}
		head, found := "  server "+s.name+": ", false
		for i, l := range lines {
			if strings.HasPrefix(l, head) {
				lines[i], found = l+", "+text, true
				break
			}
		}
		if !found {
			lines = append(lines, head+text)
		}
	}
	return lines
}

func rateTokens(r store.Rate) string {
	return tokenRate(r.Records, r.Tokens, r.Unknown, float64(r.Seconds()))
}

// etaText is store.ETA as a progress line says it: "done", "ETA unknown",
// "ETA 4m10s".
func etaText(left uint64, r store.Rate) string {
	eta := store.ETA(int64(min(left, math.MaxInt64)), r.PerSecond())
	if eta == "done" {
		return eta
	}
	return "ETA " + eta
}

// turnsText says how a dataset's conversations stand, when it has any
// asked turn by turn: ", 120 earlier turns answered, 12 conversations half
// done" (this run's turn lines; the conversations with some turns recorded
// but not their last).
func (ds *dsRun) turnsText() string {
	t, h := ds.turnsDone.Load(), ds.halfDone.Load()
	if t == 0 && h == 0 {
		return ""
	}
	return fmt.Sprintf(", %d earlier turns answered, %d conversations half done", t, h)
}

// truncatedText says how many of a dataset's answers, per the index, were
// cut at the token limit: ", 12 truncated"; "" for none.
func truncatedText(s store.Summary) string {
	if n := s.Stage(store.Raw).Finish["length"]; n > 0 {
		return fmt.Sprintf(", %d truncated", n)
	}
	return ""
}

// truncatedSummary says how many of the run's answers were cut at the
// token limit, and what to do; "" when none was.
func (r *run) truncatedSummary(sum *Summary) string {
	if sum.Truncated == 0 {
		return ""
	}
	limit := "the server's default max_new_tokens"
	if n := r.cfg.Sampling.MaxNewTokens; n != nil {
		limit = fmt.Sprintf("%d tokens", *n)
	}
	head := fmt.Sprintf("gen: %d of %d answers were cut at %s (finish_reason length)", sum.Truncated, sum.Responses, limit)
	switch x := r.cfg.Export; {
	case x == nil:
		return head + ": raise --max-new-tokens, or export keeps them only with --include-truncated"
	case x.IncludeTruncated:
		return head + "; --include-truncated keeps them, cut, in the records: raise --max-new-tokens for whole answers"
	}
	return head + ", so --export excluded them as length: raise --max-new-tokens, or --include-truncated keeps them"
}

// final prints the run's summary.
func (r *run) final(sum *Summary) {
	secs := sum.Elapsed.Seconds()
	tokens := fmt.Sprintf("%d tokens", sum.Tokens)
	switch {
	case sum.UnknownTokens > 0 && sum.UnknownTokens == sum.Responses:
		tokens = "tokens unknown: the server reported no counts"
	case sum.UnknownTokens > 0:
		tokens = fmt.Sprintf(">=%d tokens; %d answers without a count", sum.Tokens, sum.UnknownTokens)
	}
	r.logf("gen: %d answers (%s) and %d errors in %s: %.1f answers/s, %s",
		sum.Responses, tokens, sum.Errors, sum.Elapsed.Round(time.Millisecond), float64(sum.Responses)/secs,
		tokenRate(sum.Responses, sum.Tokens, sum.UnknownTokens, secs))
	for _, l := range r.pool.retrySummary() {
		r.logf("%s", l)
	}
	if t := r.truncatedSummary(sum); t != "" {
		r.logf("%s", t)
	}
	var half int64
	for _, ds := range r.sets {
		half += ds.halfDone.Load()
	}
	if sum.Turns > 0 || half > 0 {
		more := ""
		if half > 0 {
			more = fmt.Sprintf("; %d conversations are half done (the next run asks only their missing turns)", half)
		}
		r.logf("gen: conversations: an answer is a whole conversation, written with its last turn; %d earlier turns were answered into turns.jsonl (their tokens are in the count above)%s", sum.Turns, more)
	}
	r.db.View(func(v *store.View) error {
		for _, ds := range r.sortedSets() {
			s, err := v.Summary(ds.Name)
			if err != nil {
				continue
			}
			total := s.Stage(store.Prompts).Records
			left := ""
			if n := s.Skipped(); n > 0 {
				left = fmt.Sprintf(", %d lines left out of the index", n)
			}
			r.logf("  %s: %d/%d answered (%d this run), %d errors, %d still missing%s%s%s -> %s",
				ds.Name, total-s.MissingRaw(), total, ds.ok.Load(), s.Overlap.ErrorsOpen, s.MissingRaw(), ds.turnsText(), truncatedText(s), left, ds.Raw)
			if r.cfg.Export != nil {
				e := &ds.exp
				r.logf("  %s: %d %s records, %d excluded%s, %d left (this run); %d records, %d excluded, %d answers without either in all -> %s",
					ds.Name, e.records, r.cfg.Export.Format, e.excluded, reasonsText(e.reasons), e.left,
					s.Stage(store.Tokenized).Records, s.Excluded(), s.MissingTokenized(), ds.Tokenized)
			}
		}
		return nil
	})
	if n := r.rep.Skipped(); n > 0 {
		r.logf("gen: %d lines were left out of the index (see above); a prompt among them is not sent", n)
	}
}
