package gen

import (
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"gendex/ingest"
	"gendex/store"
	"gendex/store/terminal"
)

// rateWindow counts this run's answers per second, over the last minute,
// for the progress lines; it measures them by the store's rate model
// (store.RateSpan), the rule `query throughput` uses for the index.
type rateWindow struct {
	mu       sync.Mutex
	first    int64 // the second of the first answer, when hasFirst
	hasFirst bool
	last     int64 // the second of the last answer, when hasLast
	hasLast  bool
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
	if n > 0 {
		w.last, w.hasLast = max(w.last, sec), true
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

// rate measures the answers of the window ending at now by the one rate
// rule of gen's lines and watch: the window starts at the latest of now
// less window, the run's start (runStart, a Unix second) and the
// dataset's first answer (indexFirst, the index's, when hasIndex; else
// this run's first), so the idle seconds before a resumed run are never
// counted.
func (w *rateWindow) rate(now time.Time, window time.Duration, runStart, indexFirst int64, hasIndex bool) store.Rate {
	w.mu.Lock()
	defer w.mu.Unlock()
	first, has := w.first, w.hasFirst
	if hasIndex && (!has || indexFirst < first) {
		first, has = indexFirst, true
	}
	if has {
		first = max(first, runStart)
	}
	r := store.RateSpan(now, window, first, has)
	for _, b := range w.secs {
		if b.sec >= r.From && b.sec < r.To {
			r.Records += b.n
			r.Tokens += b.tokens
			r.Unknown += b.unknown
		}
	}
	return r
}

// answering reports whether this run answered the dataset in the last
// store.AnsweringWindow at now (the seconds of that window, as
// store.RateSpan counts them): store.DatasetETA's being answered.
func (w *rateWindow) answering(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hasLast && w.last >= store.RateSpan(now, store.AnsweringWindow, 0, false).From
}

// tokenRate describes a token rate honestly: "unknown" when no answer
// reported a count, a lower bound when some did not.
func tokenRate(n, tokens, unknown int64, secs float64) string {
	switch {
	case n > 0 && unknown == n:
		return "tokens/s unknown"
	case unknown > 0:
		return fmt.Sprintf(">=%.0f tokens/s (%s without a token count)", float64(tokens)/secs, counted(unknown, "answer", "answers"))
	}
	return fmt.Sprintf("%.0f tokens/s", float64(tokens)/secs)
}

// shortTokens is rateTokens for a narrow terminal: "812 tok/s",
// ">=800 tok/s", "tok/s unknown".
func shortTokens(r store.Rate) string {
	secs := r.Seconds()
	switch {
	case r.Records > 0 && r.Unknown == r.Records:
		return "tok/s unknown"
	case r.Unknown > 0:
		return fmt.Sprintf(">=%.0f tok/s", float64(r.Tokens)/secs)
	}
	return fmt.Sprintf("%.0f tok/s", float64(r.Tokens)/secs)
}

// progress is what the run says of itself while it runs and at its end:
// the live lines on a terminal or the log's progress lines (report), and
// the summary (final). It only reads: the datasets' counts, the index,
// the pool, the monitor's view of the servers and stalls; it sends
// nothing, writes no file and stores nothing. Run builds it once the pool
// is known (connect) and calls final; generate runs report.
type progress struct {
	ctl  *control
	cfg  *Config // read only
	db   *store.DB
	sets []*dsRun
	live *liveLog // the log, on a terminal; nil otherwise
	pool *pool
	mon  *monitor // the servers' metrics and stalls; nil: not shown
	iso  *isolation
	rep  *ingest.Reporter // the lines the index left out
	// toolStops counts the tool conversations stopped (toolturns.go); owed
	// says what a redo leaves owed (run.sayOwed, redo.go); nil: nothing.
	toolStops *stopCounts
	owed      func(*store.View)
}

// report reports until stop is closed: live lines on a terminal, redrawn
// every second and at once when the terminal is resized; else a log line
// per dataset every LogEvery.
func (pr *progress) report(stop <-chan struct{}) {
	every := pr.cfg.LogEvery
	var resized chan os.Signal
	if pr.live != nil {
		every = time.Second
		resized = make(chan os.Signal, 1)
		terminal.NotifyResize(resized)
		defer signal.Stop(resized)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			if pr.live != nil {
				pr.live.stop()
			}
			return
		case <-resized:
			pr.live.redraw()
			continue
		case <-tick.C:
		}
		now := time.Now()
		if pr.live != nil {
			pr.live.draw(pr.status(now))
			continue
		}
		stamp := now.Format(time.TimeOnly)
		for _, l := range pr.statusLines(now) {
			fmt.Fprintf(pr.cfg.Log, "%s %s\n", stamp, l)
		}
	}
}

// statusLines are the status lines whole, as the log off a terminal has
// them (see status).
func (pr *progress) statusLines(now time.Time) []string {
	var out []string
	for _, l := range pr.status(now) {
		out = append(out, l.String())
	}
	return out
}

// status describes the run now: one line for the run, a line per server
// (when gen reads their /metrics, or they retried), one per dataset that is
// not finished (or was worked on in this run).
//
// Rates follow the one rule of gen's lines and watch (rateWindow.rate),
// and so does the ETA (store.DatasetETA): the run's rate is its answers
// per second over all datasets, and as gen answers the datasets one after
// another, a dataset being answered has as its ETA the prompts left in it
// and in those being answered before it over that rate; one not answered
// in the last 5 minutes (not started yet) is unknown, as in watch.
//
// On a narrow terminal the lines keep the dataset, answered/total, the
// rate and the ETA (and the run's prompts to go); the rest is shortened,
// then dropped: the failed after tokens/s.
func (pr *progress) status(now time.Time) []liveLine {
	sums := map[string]store.Summary{}
	type first struct {
		sec int64
		ok  bool
	}
	firsts := make([]first, len(pr.sets))
	var left uint64
	var known bool // what is to go (a redo still finding its answers: a lower bound)
	pr.db.View(func(v *store.View) error {
		for i, ds := range pr.sets {
			if s, err := ds.summary(v); err == nil {
				sums[ds.Name] = s
			}
			firsts[i].sec, firsts[i].ok = v.FirstSecond(ds.Name)
		}
		n, k := toGo(v, pr.sets)
		left, known = uint64(n), k
		return nil
	})
	rates := make([]store.Rate, len(pr.sets))
	for i, ds := range pr.sets {
		rates[i] = ds.rate.rate(now, progressWindow, pr.ctl.started.Unix(), firsts[i].sec, firsts[i].ok)
	}
	all := store.TotalRate(now, progressWindow, rates)

	up, n := pr.pool.upCount(), len(pr.pool.servers)
	answering := up - pr.pool.stalledCount() // a stalled server is not up on the line (stall.go)
	head := liveLine{{text: fmt.Sprintf("gen: %d/%d servers up", answering, n), short: fmt.Sprintf("gen: %d/%d up", answering, n)}}
	if st := pr.mon.stallText(); st != "" { // stall.go
		head = append(head, part{text: ", " + st})
	}
	for _, s := range pr.pool.servers {
		if !s.up.Load() {
			down := now.Sub(time.UnixMilli(s.downAt.Load())).Round(time.Second)
			bound := ""
			if pr.cfg.DownLimit > 0 && up == 0 {
				bound = fmt.Sprintf(" (gen stops at %s: --down-limit)", roundDuration(pr.cfg.DownLimit))
			}
			head = append(head, part{text: fmt.Sprintf(", %s down %s%s", s.name, down, bound), short: fmt.Sprintf(", %s down %s", s.name, down), drop: 5})
		}
	}
	isoText, isoShort := pr.iso.liveText(pr.cfg.MaxCrashes)
	head = append(head,
		part{text: fmt.Sprintf(", %d in flight", pr.pool.inFlight()), drop: 3},
		part{text: isoText, short: isoShort, drop: 5},
		part{text: pr.pool.retriesLine(), drop: 6},
		part{text: fmt.Sprintf(", %.1f answers/s", all.PerSecond()), short: fmt.Sprintf(", %.1f/s", all.PerSecond())},
		part{text: ", " + rateTokens(all), short: ", " + shortTokens(all), drop: 2},
		part{text: fmt.Sprintf(" (last %ds)", int64(all.Seconds())), drop: 4},
		toGoPart(left, known),
		part{text: ", " + etaKnown(max(left, uint64(pr.pool.inFlight())), all, known)})
	lines := []liveLine{head}
	for _, l := range pr.withRetries(pr.mon.serverLines(now), now) {
		lines = append(lines, serverLine(l))
	}
	var ahead int64 // prompts left in the datasets being answered so far
	for i, ds := range pr.sets {
		s := sums[ds.Name]
		owed, total := s.Owed(), s.Units()
		left := min(owed.ToGo(), total) // a redo's answers asked again are to go
		rate := rates[i]
		if left == 0 && owed.RedoKnown && ds.ok.Load()+ds.failed.Load() == 0 {
			continue // finished before this run
		}
		eta := etaWords(store.DatasetETA(int64(min(left, math.MaxInt64)), ds.rate.answering(now), &ahead, all.PerSecond()))
		counts, eta := doneParts(owed, total, eta)
		if ds.samples > 1 {
			counts = unitParts(s, owed)
		}
		l := append(liveLine{{text: "  "}, {text: ds.Name, flex: true}}, counts...)
		if t := ds.turnsText(); t != "" {
			l = append(l, part{text: t, short: fmt.Sprintf(", %d turns, %d half done", ds.turnsDone.Load(), ds.halfDone.Load()), drop: 5})
		}
		if t := truncatedText(s); t != "" {
			l = append(l, part{text: t, short: fmt.Sprintf(", %d trunc", s.Truncated()), drop: 6})
		}
		if pr.cfg.Export != nil {
			l = append(l, part{text: exportText(s), short: fmt.Sprintf(", %d rec, %d excl", s.Stage(store.Tokenized).Records, s.Excluded()), drop: 7})
		}
		l = append(l,
			part{text: fmt.Sprintf(", %.1f answers/s", rate.PerSecond()), short: fmt.Sprintf(", %.1f/s", rate.PerSecond())},
			part{text: ", " + rateTokens(rate), short: ", " + shortTokens(rate), drop: 2},
			part{text: ", " + eta})
		lines = append(lines, l)
	}
	return lines
}

// serverLine is a server's status line ("  server NAME: up, 3 running,
// ...") in parts: on a narrow terminal its items lose their notes in
// parentheses, then go from the right; the state (up, down 3s) stays.
func serverLine(s string) liveLine {
	const lead = "  server "
	rest, ok := strings.CutPrefix(s, lead)
	i := strings.Index(rest, ": ")
	if !ok || i < 0 {
		return liveLine{{text: s}}
	}
	name := rest[:i]
	l := liveLine{{text: lead, short: "  "}, {text: name, short: strings.TrimPrefix(name, "http://"), flex: true}}
	for j, item := range splitTop(rest[i+2:]) {
		sep, drop := ", ", 1
		if j == 0 {
			sep, drop = ": ", 0
		}
		p := part{text: sep + item, drop: drop}
		if short := withoutNote(item); short != "" {
			p.short = sep + short
		}
		l = append(l, p)
	}
	return l
}

// withRetries adds to the servers' lines (serverLines) what each server's
// retries are (retries.go): at the end of its line, or on a line of its
// own when it has none.
func (pr *progress) withRetries(lines []string, now time.Time) []string {
	for _, s := range pr.pool.servers {
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
	return tokenRate(r.Records, r.Tokens, r.Unknown, r.Seconds())
}

// etaText is store.ETA as a progress line says it: "done", "ETA unknown",
// "ETA 4m10s".
func etaText(left uint64, r store.Rate) string {
	return etaWords(store.ETA(int64(min(left, math.MaxInt64)), r.PerSecond()))
}

// etaWords is an ETA of store's as a progress line says it.
func etaWords(eta string) string {
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
	return fmt.Sprintf(", %s answered, %s half done", counted(t, "earlier turn", "earlier turns"), counted(h, "conversation", "conversations"))
}

// truncatedText says how many of a dataset's answers, per the index, were
// cut at the token limit: ", 12 truncated"; "" for none.
func truncatedText(s store.Summary) string {
	if n := s.Truncated(); n > 0 {
		return fmt.Sprintf(", %d truncated", n)
	}
	return ""
}

// final prints the run's summary.
func (pr *progress) final(sum *Summary) {
	secs := sum.Elapsed.Seconds()
	tokens := counted(sum.Tokens, "token", "tokens")
	switch {
	case sum.UnknownTokens > 0 && sum.UnknownTokens == sum.Responses:
		tokens = "tokens unknown: the server reported no counts"
	case sum.UnknownTokens > 0:
		tokens = fmt.Sprintf(">=%d tokens; %s without a count", sum.Tokens, counted(sum.UnknownTokens, "answer", "answers"))
	}
	pr.ctl.logf("gen: %s (%s) and %s in %s: %.1f answers/s, %s",
		counted(sum.Responses, "answer", "answers"), tokens, counted(sum.Errors, "error", "errors"), sum.Elapsed.Round(time.Millisecond), float64(sum.Responses)/secs,
		tokenRate(sum.Responses, sum.Tokens, sum.UnknownTokens, secs))
	for _, l := range pr.pool.retrySummary() {
		pr.ctl.logf("%s", l)
	}
	if l := pr.iso.summaryLine(pr.cfg.MaxCrashes); l != "" {
		pr.ctl.logf("%s", l)
	}
	for _, l := range pr.mon.stallSummary(time.Now()) { // stallsay.go
		pr.ctl.logf("%s", l)
	}
	switch {
	case sum.Interrupted && sum.GivenUp > 0:
		were := "were"
		if sum.GivenUp == 1 {
			were = "was"
		}
		pr.ctl.logf("gen: interrupted: %s in flight %s given up after --grace %s; the next run asks them again", counted(sum.GivenUp, "answer", "answers"), were, pr.cfg.Grace)
	case sum.Interrupted:
		pr.ctl.logf("gen: interrupted: no request was in flight when it stopped; the prompts still missing are asked by the next run")
	}
	if t := givenUpText(sum); t != "" { // abort.go
		pr.ctl.logf("%s", t)
	}
	if t := pr.truncatedSummary(sum); t != "" {
		pr.ctl.logf("%s", t)
	}
	var half int64
	for _, ds := range pr.sets {
		half += ds.halfDone.Load()
	}
	if sum.Turns > 0 || half > 0 {
		more := ""
		if half > 0 {
			more = fmt.Sprintf("; %d conversations are half done (the next run asks only their missing turns)", half)
		}
		pr.ctl.logf("gen: conversations: an answer is a whole conversation, written with its last turn; %d earlier turns were answered into turns.jsonl (their tokens are in the count above)%s", sum.Turns, more)
	}
	if pr.toolStops != nil {
		if t := pr.toolStops.text(); t != "" {
			pr.ctl.logf("%s", t)
		}
	}
	pr.db.View(func(v *store.View) error {
		for _, ds := range sortedByName(pr.sets) {
			s, err := ds.summary(v)
			if err != nil {
				continue
			}
			total := s.Stage(store.Prompts).Records
			left := ""
			if n := s.Skipped(); n > 0 {
				left = fmt.Sprintf(", %s left out of the index", counted(n, "line", "lines"))
			}
			owed := s.Owed()
			done := fmt.Sprintf("%d/%d answered", owed.Answered, total)
			if ds.samples > 1 {
				done = unitsText(s, owed)
			}
			pr.ctl.logf("  %s: %s (%d this run), %d failed, %d to go%s%s%s -> %s",
				ds.Name, done, ds.ok.Load(), owed.Failed, owed.ToGo(), ds.turnsText(), truncatedText(s), left, ds.Raw)
			if t := ds.unsentText(); t != "" {
				pr.ctl.logf("%s", t)
			}
			if pr.cfg.Export != nil {
				e := &ds.exp
				pr.ctl.logf("  %s: %d %s records, %d excluded%s, %d left (this run); %d records, %d excluded, %d answers without either in all -> %s",
					ds.Name, e.records, pr.cfg.Export.Format, e.excluded, reasonsText(e.reasons), e.left,
					s.Stage(store.Tokenized).Records, s.Excluded(), s.MissingTokenized(), ds.Tokenized)
			}
		}
		if pr.owed != nil {
			pr.owed(v) // what a redo leaves owed (redo.go)
		}
		return nil
	})
	if n := pr.rep.Skipped(); n > 0 {
		pr.ctl.logf("gen: %s left out of the index (see above); a prompt among them is not sent", counted(n, "line was", "lines were"))
	}
}
