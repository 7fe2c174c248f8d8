package gen

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/ingest/gen/client"
)

// Retries are counted per server, by cause, so that a server that fails
// often is seen: in the live lines (progress.go), the summary, an event
// per burst (events.go) and the samples `query server` reads
// (store.ServerSample.Retries, LastError). A prompt waiting out its backoff
// is counted as such (inBackoff), so "0 in flight, 1 to go" never hides it.

// retries is what one server's failed attempts, retried, were.
type retries struct {
	mu      sync.Mutex
	n       int64            // attempts retried in this run
	byCause map[string]int64 // by retryCause
	last    string           // the last one's cause and message, briefly
	lastAt  int64            // Unix ms of the last one

	inBackoff atomic.Int64 // prompts waiting to be sent again
}

// retryCause names why an attempt failed, as the summary groups them: the
// HTTP status with the server's message shortened ("HTTP 500 'Failed to
// parse input'"), or, counted in the plural, "timeout", "abort", "refused
// connection" (the server was not there), "lost connection" (no answer).
func retryCause(err error, timedOut bool) string {
	var e *client.Error
	errors.As(err, &e)
	switch {
	case timedOut || e != nil && e.Status == 0 && strings.HasPrefix(e.Message, "timeout"):
		return "timeout"
	case e == nil:
		return "error " + quoteShort(err.Error())
	case e.Status == http.StatusOK:
		return "abort"
	case e.Status != 0:
		msg := strings.TrimSpace(e.Message)
		if msg == "" || msg == http.StatusText(e.Status) {
			return fmt.Sprintf("HTTP %d", e.Status)
		}
		return fmt.Sprintf("HTTP %d %s", e.Status, quoteShort(msg))
	case errors.Is(e.Err, syscall.ECONNREFUSED):
		return "refused connection"
	}
	return "lost connection"
}

// shortMessage is how much of a server's message a cause keeps.
const shortMessage = 40

// quoteShort quotes the start of msg, on one line: 'Failed to parse input'.
func quoteShort(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > shortMessage {
		cut := string(r[:shortMessage+1])
		if i := strings.LastIndexByte(cut, ' '); i >= shortMessage/2 {
			cut = cut[:i] // at a word's end
		} else {
			cut = string(r[:shortMessage])
		}
		msg = strings.TrimRight(cut, " ,.:;") + "..."
	}
	return "'" + msg + "'"
}

// briefError is a retried attempt's error as a live line shows it: its
// cause, with the transport's message when the cause alone says little.
func briefError(cause string, err error) string {
	var e *client.Error
	if cause == "lost connection" && errors.As(err, &e) && e.Message != "" {
		return cause + " " + quoteShort(e.Message)
	}
	return cause
}

// causeText is n attempts of cause: "150 HTTP 500 'Failed to parse
// input'", "2 timeouts".
func causeText(n int64, cause string) string {
	if n != 1 && !strings.HasPrefix(cause, "HTTP ") && !strings.HasPrefix(cause, "error ") {
		cause += "s"
	}
	return fmt.Sprintf("%d %s", n, cause)
}

// maxCauses bounds the causes a summary names; the rest are counted.
const maxCauses = 4

// causesText lists causes most frequent first (ties by name), at most
// maxCauses of them and then how many attempts the others were ("3
// others").
func causesText(byCause map[string]int64) string {
	type kv struct {
		cause string
		n     int64
	}
	var list []kv
	for c, n := range byCause {
		list = append(list, kv{c, n})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].cause < list[j].cause
	})
	var parts []string
	var other int64
	for i, x := range list {
		if i < maxCauses {
			parts = append(parts, causeText(x.n, x.cause))
		} else {
			other += x.n
		}
	}
	if other > 0 {
		parts = append(parts, causeText(other, "other"))
	}
	return strings.Join(parts, ", ")
}

// add counts one attempt retried.
func (t *retries) add(cause, brief string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byCause == nil {
		t.byCause = map[string]int64{}
	}
	t.n++
	t.byCause[cause]++
	t.last, t.lastAt = brief, now.UnixMilli()
}

// retryState is a snapshot of a server's retries.
type retryState struct {
	n         int64
	byCause   map[string]int64
	last      string
	lastAt    int64
	inBackoff int64
}

func (t *retries) state() retryState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := retryState{n: t.n, last: t.last, lastAt: t.lastAt, inBackoff: t.inBackoff.Load()}
	if len(t.byCause) > 0 {
		st.byCause = make(map[string]int64, len(t.byCause))
		for c, n := range t.byCause {
			st.byCause[c] = n
		}
	}
	return st
}

// retried counts an attempt on s that failed with err and is sent again
// (timedOut: it ran out of --request-timeout): on s, and in the run's
// retry events.
func (a *asker) retried(s *server, err error, timedOut bool) {
	cause := retryCause(err, timedOut)
	s.retries.add(cause, briefError(cause, err), time.Now())
	if a.mon != nil {
		a.mon.bursts.retried(s.name, cause)
	}
}

// retry counts the failed attempt on s as retried and waits d, the
// backoff, counted as in backoff on s. It returns false, counting
// nothing, when the run stops first.
func (a *asker) retry(s *server, err error, timedOut bool, d time.Duration) bool {
	if a.ctl.stopping() {
		return false
	}
	a.retried(s, err, timedOut)
	s.retries.inBackoff.Add(1)
	defer s.retries.inBackoff.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.ctl.stop.Done():
		return false
	}
}

// inBackoff returns the prompts waiting out a backoff on every server.
func (p *pool) inBackoff() int64 {
	var n int64
	for _, s := range p.servers {
		n += s.retries.inBackoff.Load()
	}
	return n
}

// retriesLine is the totals line's part about retries: ", 3 in backoff,
// 152 attempts retried"; "" when there is nothing to say.
func (p *pool) retriesLine() string {
	if p == nil {
		return ""
	}
	var n int64
	for _, s := range p.servers {
		n += s.retries.state().n
	}
	out := ""
	if b := p.inBackoff(); b > 0 {
		out += fmt.Sprintf(", %d in backoff", b)
	}
	if n > 0 {
		out += ", " + attemptsText(n) + " retried"
	}
	return out
}

// serverRetries is a server's live line's part about retries: "20 retried
// (last HTTP 500 'Failed to parse input', 3s ago), 1 in backoff"; "" when
// it had none.
func serverRetries(s *server, now time.Time) string {
	st := s.retries.state()
	var parts []string
	if st.n > 0 {
		ago := now.Sub(time.UnixMilli(st.lastAt)).Round(time.Second)
		parts = append(parts, fmt.Sprintf("%d retried (last %s, %s ago)", st.n, st.last, max(ago, 0)))
	}
	if st.inBackoff > 0 {
		parts = append(parts, fmt.Sprintf("%d in backoff", st.inBackoff))
	}
	return strings.Join(parts, ", ")
}

// retrySummary is the summary's lines about retries: none when no attempt
// was retried; "gen: 152 attempts retried: 150 HTTP 500 'Failed to parse
// input', 2 timeouts" for one server; a line per server that had any when
// there are several.
func (p *pool) retrySummary() []string {
	if p == nil {
		return nil
	}
	var total int64
	var lines []string
	for _, s := range p.servers {
		st := s.retries.state()
		if st.n == 0 {
			continue
		}
		total += st.n
		lines = append(lines, fmt.Sprintf("  %s: %s retried: %s", s.name, attemptsText(st.n), causesText(st.byCause)))
	}
	switch {
	case total == 0:
		return nil
	case len(p.servers) == 1:
		return []string{fmt.Sprintf("gen: %s retried: %s", attemptsText(total), causesText(p.servers[0].retries.state().byCause))}
	}
	return append([]string{fmt.Sprintf("gen: %s retried on %d of %d servers:", attemptsText(total), len(lines), len(p.servers))}, lines...)
}

// retriesTotal returns the attempts retried on every server.
func (p *pool) retriesTotal() int64 {
	if p == nil {
		return 0
	}
	var n int64
	for _, s := range p.servers {
		n += s.retries.state().n
	}
	return n
}

// attemptsText is "1 attempt", "152 attempts".
func attemptsText(n int64) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// sample returns what a server's sample keeps of its retries
// (store.ServerSample's Retries, InBackoff, LastError, LastErrorAt).
func (t *retries) sample() (n, inBackoff int64, last string, lastAt int64) {
	st := t.state()
	return st.n, st.inBackoff, st.last, st.lastAt
}
