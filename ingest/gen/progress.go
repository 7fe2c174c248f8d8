package gen

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

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

// liveLog is the log on a terminal: the status lines (the block) stay at
// the bottom, each fitted to the terminal's width as it is at that moment
// (liveLine.fit: a line never wraps), and no more of them than the
// terminal has rows. Each redraw moves up over exactly the rows the block
// took, clears them and draws it again; a message (any other write) goes
// above the block, which is drawn again under it at once. Messages may
// wrap: they are written once and never moved over.
type liveLog struct {
	mu sync.Mutex
	w  io.Writer
	// size returns the terminal's columns and rows now (0, 0: unknown, the
	// lines are not fitted); nil reads them from w when it is a terminal.
	size    func() (cols, rows int)
	block   []liveLine // the status lines, as last built
	drawn   []int      // the columns of each line on screen
	partial []byte     // the start of a message's line, until its newline
	stopped bool       // the block is gone for good: writes go straight through
}

func (l *liveLog) termSize() (cols, rows int) {
	if l.size != nil {
		return l.size()
	}
	if f, ok := l.w.(interface{ Fd() uintptr }); ok {
		return terminal.Size(f.Fd())
	}
	return 0, 0
}

// Write writes the whole lines of p above the block, each broken between
// words to the terminal's width; the start of a line waits for its end.
func (l *liveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cols, rows := l.termSize()
	if l.stopped {
		_, err := io.WriteString(l.w, terminal.WrapLines(string(p), cols-1))
		return len(p), err
	}
	l.partial = append(l.partial, p...)
	i := bytes.LastIndexByte(l.partial, '\n')
	if i < 0 {
		return len(p), nil
	}
	var b bytes.Buffer
	l.erase(&b, cols, true)
	b.WriteString(terminal.WrapLines(string(l.partial[:i+1]), cols-1))
	l.partial = append(l.partial[:0], l.partial[i+1:]...)
	l.render(&b, cols, rows)
	_, err := l.w.Write(b.Bytes())
	return len(p), err
}

// erase moves the cursor up to the block's first row, and clears the
// block when clear (else the redraw clears each row as it writes it).
// The rows are the ones the block takes now: a line of w columns drawn
// in a terminal made narrower since takes ceil(w/cols) rows once the
// terminal has re-wrapped it (tmux, VTE, iTerm2, kitty and Windows
// Terminal do).
func (l *liveLog) erase(b *bytes.Buffer, cols int, clear bool) {
	rows := 0
	for _, w := range l.drawn {
		if cols > 0 && w > cols {
			rows += (w + cols - 1) / cols
		} else {
			rows++
		}
	}
	l.drawn = l.drawn[:0]
	if rows == 0 {
		return
	}
	fmt.Fprintf(b, "\r\x1b[%dA", rows)
	if clear {
		b.WriteString("\x1b[J")
	}
}

// render draws the block at the cursor, fitted to cols (a column to spare,
// so that no terminal wraps a full line) and to rows (a row to spare for
// the cursor; the lines that do not fit are counted on the last).
func (l *liveLog) render(b *bytes.Buffer, cols, rows int) {
	width := 0
	if cols > 1 {
		width = cols - 1
	}
	lines := make([]string, 0, len(l.block))
	for _, ll := range l.block {
		lines = append(lines, ll.fit(width))
	}
	if room := rows - 1; rows > 0 && len(lines) > max(room, 1) {
		keep := max(room-1, 1)
		more := liveLine{{text: fmt.Sprintf("  … and %d more lines (a taller terminal shows them; gendex watch too)", len(lines)-keep),
			short: fmt.Sprintf("  … %d more", len(lines)-keep)}}
		lines = lines[:keep]
		if room > 1 {
			lines = append(lines, more.fit(width))
		}
	}
	for _, s := range lines {
		b.WriteString("\x1b[2K" + s + "\n")
		l.drawn = append(l.drawn, textWidth(s))
	}
	b.WriteString("\x1b[J")
}

// draw replaces the block with lines.
func (l *liveLog) draw(lines []liveLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.block = lines
	l.redrawLocked()
}

// redraw draws the block again (the terminal was resized).
func (l *liveLog) redraw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redrawLocked()
}

func (l *liveLog) redrawLocked() {
	if l.stopped {
		return
	}
	var b bytes.Buffer
	cols, rows := l.termSize()
	l.erase(&b, cols, false)
	l.render(&b, cols, rows)
	io.Copy(l.w, &b)
}

// stop clears the block for good (the run's summary follows), and ends a
// message's unfinished line.
func (l *liveLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	cols, _ := l.termSize()
	l.erase(&b, cols, true)
	if len(l.partial) > 0 {
		b.Write(l.partial)
		b.WriteString("\n")
		l.partial = nil
	}
	l.block, l.stopped = nil, true
	io.Copy(l.w, &b)
}

// progress reports until stop is closed: live lines on a terminal, redrawn
// every second and at once when the terminal is resized; else a log line
// per dataset every LogEvery.
func (r *run) progress(stop <-chan struct{}) {
	every := r.cfg.LogEvery
	var resized chan os.Signal
	if r.live != nil {
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
			if r.live != nil {
				r.live.stop()
			}
			return
		case <-resized:
			r.live.redraw()
			continue
		case <-tick.C:
		}
		now := time.Now()
		if r.live != nil {
			r.live.draw(r.status(now))
			continue
		}
		stamp := now.Format(time.TimeOnly)
		for _, l := range r.statusLines(now) {
			fmt.Fprintf(r.cfg.Log, "%s %s\n", stamp, l)
		}
	}
}

// statusLines are the status lines whole, as the log off a terminal has
// them (see status).
func (r *run) statusLines(now time.Time) []string {
	var out []string
	for _, l := range r.status(now) {
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
func (r *run) status(now time.Time) []liveLine {
	sums := map[string]store.Summary{}
	type first struct {
		sec int64
		ok  bool
	}
	firsts := make([]first, len(r.sets))
	var left uint64
	var known bool // what is to go (a redo still finding its answers: a lower bound)
	r.db.View(func(v *store.View) error {
		for i, ds := range r.sets {
			if s, err := v.Summary(ds.Name); err == nil {
				sums[ds.Name] = s
			}
			firsts[i].sec, firsts[i].ok = v.FirstSecond(ds.Name)
		}
		n, k := r.toGo(v)
		left, known = uint64(n), k
		return nil
	})
	rates := make([]store.Rate, len(r.sets))
	for i, ds := range r.sets {
		rates[i] = ds.rate.rate(now, progressWindow, r.ctl.started.Unix(), firsts[i].sec, firsts[i].ok)
	}
	all := store.TotalRate(now, progressWindow, rates)

	up, n := r.asker.pool.upCount(), len(r.asker.pool.servers)
	head := liveLine{{text: fmt.Sprintf("gen: %d/%d servers up", up, n), short: fmt.Sprintf("gen: %d/%d up", up, n)}}
	if st := r.stallText(); st != "" { // stall.go
		head = append(head, part{text: ", " + st})
	}
	for _, s := range r.asker.pool.servers {
		if !s.up.Load() {
			down := now.Sub(time.UnixMilli(s.downAt.Load())).Round(time.Second)
			bound := ""
			if r.cfg.DownLimit > 0 && up == 0 {
				bound = fmt.Sprintf(" (gen stops at %s: --down-limit)", roundDuration(r.cfg.DownLimit))
			}
			head = append(head, part{text: fmt.Sprintf(", %s down %s%s", s.name, down, bound), short: fmt.Sprintf(", %s down %s", s.name, down), drop: 5})
		}
	}
	isoText, isoShort := r.asker.iso.liveText(r.cfg.MaxCrashes)
	head = append(head,
		part{text: fmt.Sprintf(", %d in flight", r.asker.pool.inFlight()), drop: 3},
		part{text: isoText, short: isoShort, drop: 5},
		part{text: r.asker.pool.retriesLine(), drop: 6},
		part{text: fmt.Sprintf(", %.1f answers/s", all.PerSecond()), short: fmt.Sprintf(", %.1f/s", all.PerSecond())},
		part{text: ", " + rateTokens(all), short: ", " + shortTokens(all), drop: 2},
		part{text: fmt.Sprintf(" (last %ds)", int64(all.Seconds())), drop: 4},
		toGoPart(left, known),
		part{text: ", " + etaKnown(max(left, uint64(r.asker.pool.inFlight())), all, known)})
	lines := []liveLine{head}
	for _, l := range r.withRetries(r.serverLines(now), now) {
		lines = append(lines, serverLine(l))
	}
	var ahead int64 // prompts left in the datasets being answered so far
	for i, ds := range r.sets {
		s := sums[ds.Name]
		owed, total := s.Owed(), s.Stage(store.Prompts).Records
		left := min(owed.ToGo(), total) // a redo's answers asked again are to go
		rate := rates[i]
		if left == 0 && owed.RedoKnown && ds.ok.Load()+ds.failed.Load() == 0 {
			continue // finished before this run
		}
		eta := etaWords(store.DatasetETA(int64(min(left, math.MaxInt64)), ds.rate.answering(now), &ahead, all.PerSecond()))
		counts, eta := doneParts(owed, total, eta)
		l := append(liveLine{{text: "  "}, {text: ds.Name, flex: true}}, counts...)
		if t := ds.turnsText(); t != "" {
			l = append(l, part{text: t, short: fmt.Sprintf(", %d turns, %d half done", ds.turnsDone.Load(), ds.halfDone.Load()), drop: 5})
		}
		if t := truncatedText(s); t != "" {
			l = append(l, part{text: t, short: fmt.Sprintf(", %d trunc", s.Truncated()), drop: 6})
		}
		if r.cfg.Export != nil {
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
func (r *run) withRetries(lines []string, now time.Time) []string {
	for _, s := range r.asker.pool.servers {
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
func (r *run) final(sum *Summary) {
	secs := sum.Elapsed.Seconds()
	tokens := counted(sum.Tokens, "token", "tokens")
	switch {
	case sum.UnknownTokens > 0 && sum.UnknownTokens == sum.Responses:
		tokens = "tokens unknown: the server reported no counts"
	case sum.UnknownTokens > 0:
		tokens = fmt.Sprintf(">=%d tokens; %s without a count", sum.Tokens, counted(sum.UnknownTokens, "answer", "answers"))
	}
	r.ctl.logf("gen: %s (%s) and %s in %s: %.1f answers/s, %s",
		counted(sum.Responses, "answer", "answers"), tokens, counted(sum.Errors, "error", "errors"), sum.Elapsed.Round(time.Millisecond), float64(sum.Responses)/secs,
		tokenRate(sum.Responses, sum.Tokens, sum.UnknownTokens, secs))
	for _, l := range r.asker.pool.retrySummary() {
		r.ctl.logf("%s", l)
	}
	if l := r.asker.iso.summaryLine(r.cfg.MaxCrashes); l != "" {
		r.ctl.logf("%s", l)
	}
	switch {
	case sum.Interrupted && sum.GivenUp > 0:
		r.ctl.logf("gen: interrupted: %s in flight were given up after --grace %s; the next run asks them again", counted(sum.GivenUp, "answer", "answers"), r.cfg.Grace)
	case sum.Interrupted:
		r.ctl.logf("gen: interrupted: no request was in flight when it stopped; the prompts still missing are asked by the next run")
	}
	if t := r.truncatedSummary(sum); t != "" {
		r.ctl.logf("%s", t)
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
		r.ctl.logf("gen: conversations: an answer is a whole conversation, written with its last turn; %d earlier turns were answered into turns.jsonl (their tokens are in the count above)%s", sum.Turns, more)
	}
	if t := r.talk.stops.text(); t != "" {
		r.ctl.logf("%s", t)
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
				left = fmt.Sprintf(", %s left out of the index", counted(n, "line", "lines"))
			}
			owed := s.Owed()
			r.ctl.logf("  %s: %d/%d answered (%d this run), %d failed, %d to go%s%s%s -> %s",
				ds.Name, owed.Answered, total, ds.ok.Load(), owed.Failed, owed.ToGo(), ds.turnsText(), truncatedText(s), left, ds.Raw)
			if t := ds.unsentText(); t != "" {
				r.ctl.logf("%s", t)
			}
			if r.cfg.Export != nil {
				e := &ds.exp
				r.ctl.logf("  %s: %d %s records, %d excluded%s, %d left (this run); %d records, %d excluded, %d answers without either in all -> %s",
					ds.Name, e.records, r.cfg.Export.Format, e.excluded, reasonsText(e.reasons), e.left,
					s.Stage(store.Tokenized).Records, s.Excluded(), s.MissingTokenized(), ds.Tokenized)
			}
		}
		r.sayOwed(v) // what a redo leaves owed (redo.go)
		return nil
	})
	if n := r.rep.Skipped(); n > 0 {
		r.ctl.logf("gen: %s left out of the index (see above); a prompt among them is not sent", counted(n, "line was", "lines were"))
	}
}
