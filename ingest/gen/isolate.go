package gen

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// Crash suspects (Config.MaxCrashes). A prompt that was in flight when its
// server went down (the request got no answer and /health then failed) may
// be what brought the server down (a prompt that runs it out of memory), or
// it may have been there by chance: the server was restarted, or ran out of
// memory under the load of many, and every request in flight died with it.
//
// The rule: send them all, and isolate only at a second down. When the
// server is back (or another one is up), a prompt that was in flight in
// one down is sent again at once, within --concurrency, beside every other
// prompt, as if nothing had happened: a healthy restart costs the run its
// downtime and the requests it lost, nothing more. A prompt that brings the
// server down does so again, and only then are the prompts that were in
// flight at both downs isolated: each is sent alone among such prompts
// (beside the others, within --concurrency) until it is answered or has
// been in flight at --max-crashes downs, when it is recorded as an error.
// What is isolated, and why, is said on the live line, logged, counted in
// the summary and recorded as an "isolated" event (`query events`).
//
// Why not probe with one first: one suspect that survives says nothing of
// the others, and probing them one by one is the crawl this replaces (64
// suspects of up to 8,192 tokens at 40 tokens/s, one at a time, is hours).
// Sending them all costs, when one of them does crash the server, no more
// downs than isolating them at once did: a prompt is recorded as an error
// after --max-crashes downs, and with the default 3 the one that crashes
// the server every time brings it down 3 times either way (sent with the
// others, with the others, alone), while a prompt that was beside it in the
// first two waits its turn among the isolated and is not in flight at the
// third. With --max-crashes 2 a prompt is isolated after its first down
// (isolateAt), so that the down that fails a prompt is always one it took
// alone among suspects; with 1, every prompt in flight at a down fails.

// isolateAt is the downs with a prompt in flight after which it is
// isolated: 2, or one less than maxCrashes when that is smaller (never 0:
// with maxCrashes 1 the prompt is an error first).
func isolateAt(maxCrashes int) int {
	return max(min(2, maxCrashes-1), 1)
}

// isolation counts the prompts isolated: now (waiting their turn, or in
// flight) and in the whole run.
type isolation struct {
	now, total atomic.Int64
	logged     atomic.Int64 // prompts said one by one in the log (at most maxIsolatedLogged)
}

// maxIsolatedLogged bounds the log lines of single isolated prompts; the
// live line and the events count the rest.
const maxIsolatedLogged = 10

// maxIsolatedIDs bounds the prompt ids an isolated event names.
const maxIsolatedIDs = 20

// isolate counts j as isolated after its down on s, says so in the log
// (the first maxIsolatedLogged of the run) and in s's isolated events.
func (a *asker) isolate(j *job, s *server) {
	a.iso.now.Add(1)
	a.iso.total.Add(1)
	if n := a.iso.logged.Add(1); n <= maxIsolatedLogged {
		a.ctl.logf("gen: prompt %s (%s) was in flight at %s, the last of %s: isolated, it is sent again alone among such prompts, "+
			"as it may be what brings the server down (after --max-crashes %d downs it is recorded as an error)%s",
			j.p.unitName(), j.ds.Name, downsText(j.crashes), s.name, a.cfg.MaxCrashes, moreIsolated(n))
	}
	if a.mon != nil {
		a.mon.bursts.count(burstKey{s.name, EventIsolated}, j.p.unitName())
	}
}

// moreIsolated is what the last isolated prompt said one by one in the log
// adds.
func moreIsolated(n int64) string {
	if n < maxIsolatedLogged {
		return ""
	}
	return "; further isolated prompts are counted on the progress line and named in 'gendex query events'"
}

// isolatedDone counts an isolated prompt as done: answered, failed, or
// left for the next run.
func (a *asker) isolatedDone() { a.iso.now.Add(-1) }

// liveText is the live line's part about isolated prompts: ", 3 isolated
// (in flight at 2 downs: sent one at a time)"; "" when none is.
func (iso *isolation) liveText(maxCrashes int) (text, short string) {
	n := iso.now.Load()
	if n == 0 {
		return "", ""
	}
	return fmt.Sprintf(", %d isolated (in flight at %s: sent one at a time)", n, downsText(isolateAt(maxCrashes))),
		fmt.Sprintf(", %d isolated", n)
}

// downsText is "1 down", "2 downs".
func downsText(n int) string { return counted(n, "down", "downs") }

// summaryLine is the summary's line about isolated prompts; "" when there
// were none.
func (iso *isolation) summaryLine(maxCrashes int) string {
	n := iso.total.Load()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("gen: %s isolated: in flight at %s of a server, each sent again alone among such prompts "+
		"(one in flight at --max-crashes %d downs is an error); 'gendex query events' names them",
		counted(n, "prompt was", "prompts were"), downsText(isolateAt(maxCrashes)), maxCrashes)
}

// isolatedText describes a burst of isolated prompts, the ids of u.ids.
func isolatedText(u *burst, maxCrashes int) string {
	ids := append([]string(nil), u.ids...)
	sort.Strings(ids)
	named := strings.Join(ids, ", ")
	if u.n > len(ids) {
		named += fmt.Sprintf(" and %d more", u.n-len(ids))
	}
	what := "1 prompt"
	if u.n > 1 {
		what = fmt.Sprintf("%d prompts within %s", u.n, burstWindow)
	}
	return fmt.Sprintf("%s isolated: in flight at %s, the last of this server, so each may be what brings it down; "+
		"sent again one at a time (after --max-crashes %d downs, an error): %s",
		what, downsText(isolateAt(maxCrashes)), maxCrashes, named)
}
