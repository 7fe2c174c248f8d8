package gen

import (
	"fmt"
	"strings"
	"time"

	"gendex/store"
)

// What gen says of a stall (stall.go): the run's sentence (its row, the
// head of the live lines), the message when it is found, its server's
// live line, its event's record, and the summary's lines.

// stallSentence: "stalled since 03:12: 61 requests held by gpu1:30000,
// which answers no probe".
func stallSentence(name string, st *stall, held int) string {
	probes := "which answers no probe"
	if st.probes {
		probes = "which answers probes but no request"
	}
	return fmt.Sprintf("stalled since %s: %s held by %s, %s", time.UnixMilli(st.since).UTC().Format("15:04"),
		counted(int64(held), "request", "requests"), name, probes)
}

// stallMessage is what gen prints when it finds a stall at now, in at
// most three lines of 80 columns (its record is the event's):
//
//	gen: gpu1:30000 stalled since 03:12:07, no reply for 50s: 61 requests
//	  held, /health and /metrics silent; gen waits and keeps them, sends it
//	  nothing new (details: 'gendex query events')
func stallMessage(name string, st *stall, now time.Time) string {
	probes := "/health and /metrics silent"
	if st.probes {
		probes = "though it answers probes"
	}
	return fmt.Sprintf("gen: %s stalled since %s, no reply for %s: %s held, %s; gen waits and keeps them, sends it nothing new (details: 'gendex query events')",
		name, clock(st.since), roundDuration(now.Sub(time.UnixMilli(st.since))), counted(int64(st.held), "request", "requests"), probes)
}

// stallState is s's state on its live line while it is stalled ("" when
// it is not): "stalled 52s, 4 requests held, answers no probe".
func stallState(s *server, now time.Time) string {
	f := &s.flights
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stalled
	if st == nil {
		return ""
	}
	probes := "answers no probe"
	if st.probes {
		probes = "answers probes but no request"
	}
	return fmt.Sprintf("stalled %s, %s held, %s", now.Sub(time.UnixMilli(st.since)).Round(time.Second),
		counted(int64(len(f.on)), "request", "requests"), probes)
}

// stallRecord is a stalled server's flight record, as its event's
// detail: the requests in flight and their ages, its last answer, its
// last errors (each once), its last /metrics sample, and what its probes
// said.
func stallRecord(held []flight, now time.Time, lastAnswer int64, errs []timedError, v liveView, probes string) string {
	age := func(ms int64) string { return roundDuration(now.Sub(time.UnixMilli(ms))) }
	var b strings.Builder
	fmt.Fprintf(&b, "%s in flight", counted(int64(len(held)), "request", "requests"))
	if len(held) > 0 {
		fmt.Fprintf(&b, ", ages %s to %s:", age(held[len(held)-1].sent), age(held[0].sent))
		for i, fl := range held {
			if i == flightIDs {
				fmt.Fprintf(&b, " and %d more", len(held)-i)
				break
			}
			fmt.Fprintf(&b, " %s/%s %s", fl.dataset, fl.id, age(fl.sent))
		}
	}
	b.WriteString("; last answer ")
	if lastAnswer == 0 {
		b.WriteString("none in this run")
	} else {
		fmt.Fprintf(&b, "%s (%s ago)", clock(lastAnswer), age(lastAnswer))
	}
	b.WriteString("; last errors")
	if len(errs) == 0 {
		b.WriteString(" none")
	}
	for i, e := range errs {
		if i > 0 {
			b.WriteString(" |")
		}
		fmt.Fprintf(&b, " %s %s", clock(e.at), strings.ReplaceAll(e.msg, "\n", " "))
		if e.n > 1 {
			fmt.Fprintf(&b, " (%d times)", e.n)
		}
	}
	b.WriteString("; /metrics ")
	b.WriteString(metricsRecord(v, age))
	b.WriteString("; probes: " + probes)
	return b.String()
}

// metricsRecord is what a stall's record says of the server's /metrics:
// when they last answered, and its running and queued requests and KV
// use then.
func metricsRecord(v liveView, age func(ms int64) string) string {
	switch smp := v.sample; {
	case !v.taken:
		return "not read in this run"
	case smp.NoMetrics:
		return "not served"
	case smp.LastSeen == 0:
		return "never answered"
	}
	s := fmt.Sprintf("last answered %s (%s ago)", clock(v.sample.LastSeen), age(v.sample.LastSeen))
	if smp := v.good; smp.Scraped {
		if x, ok := smp.Get(store.MetricRunning); ok {
			s += fmt.Sprintf(", %.0f running", x)
		}
		if x, ok := smp.Get(store.MetricQueued); ok {
			s += fmt.Sprintf(", %.0f queued", x)
		}
		if x, ok := smp.Get(store.MetricTokenUsage); ok {
			s += fmt.Sprintf(", KV %.0f%% used", 100*x)
		}
	}
	return s
}

func clock(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05") }

// maxStallLines is how many stalls the summary names, one line each; the
// others are counted on one more line.
const maxStallLines = 10

// stallSummary is the summary's lines of the run's stalls at now, one
// each: "gen: gpu1:30000 was stalled from 03:12:07 for 52s (61 requests
// held; it answered no probe)", or "gen: gpu1:30000 is still stalled,
// since 03:12:07 (3m; ...)"; none without a stall (or a monitor).
func (m *monitor) stallSummary(now time.Time) []string {
	if m == nil {
		return nil
	}
	var lines []string
	var more int
	var moreFor time.Duration
	for i, sp := range m.stalls.list() {
		until := sp.until
		if until == 0 {
			until = now.UnixMilli()
		}
		d := time.UnixMilli(until).Sub(time.UnixMilli(sp.since))
		if i >= maxStallLines {
			more++
			moreFor += d
			continue
		}
		probes := "it answered no probe"
		if sp.probes {
			probes = "it answered probes but no request"
		}
		held := counted(int64(sp.held), "request", "requests")
		if sp.until == 0 {
			lines = append(lines, fmt.Sprintf("gen: %s is still stalled, since %s (%s; %s held; %s)", sp.server, clock(sp.since), roundDuration(d), held, probes))
			continue
		}
		lines = append(lines, fmt.Sprintf("gen: %s was stalled from %s for %s (%s held; %s)", sp.server, clock(sp.since), roundDuration(d), held, probes))
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("gen: and %s more, %s in all: 'gendex query events' lists them", counted(more, "stall", "stalls"), roundDuration(moreFor)))
	}
	return lines
}
