package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// EventIdentity: a server came back (or was found restarted) as another
// server: another model, model path, chat template, version... than the
// one the run began with (detail: what differs, before and after).
const EventIdentity = "identity"

// errRetired is learn's error for a server that came back with another
// identity: gen sends it nothing more in this run.
var errRetired = errors.New("the server changed identity mid-run")

// identityChange compares the provenance a server is read with now to the
// one it was first read with in this run (the same comparison a resume
// makes, max_new_tokens aside; a key the server no longer tells is
// unknown, not a change). It returns "" when nothing differs.
func identityChange(first, now []byte) string {
	var a, b any
	if json.Unmarshal(first, &a) != nil || json.Unmarshal(now, &b) != nil {
		return ""
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	var diffs []string
	for k, v := range fb {
		if ignoredInComparison[k] || fa[k] == v {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: %s before, %s now", k, orUnset(fa[k]), v))
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// checkIdentity is learn's look at a server read again (it came back): the
// first reading of s in this run is kept; a later one that differs is an
// EventIdentity, said in the log, and, unless --allow-mixed, s is retired:
// it is sent nothing more (errRetired), its requests go to the other
// servers, and when no server is left the run stops, naming --allow-mixed.
func (a *asker) checkIdentity(s *server, prov []byte) error {
	first := s.identity.Load()
	if first == nil {
		s.identity.Store(&prov)
		return nil
	}
	diff := identityChange(*first, prov)
	if diff == "" {
		return nil
	}
	if a.cfg.AllowMixed {
		s.identity.Store(&prov) // the next change is said against this one
		a.ctl.logf("gen: %s came back as another server (%s); --allow-mixed: gen goes on sending to it ('gendex check' reports the datasets as mixed)", s.name, diff)
		a.identityEvent(s, diff+"; --allow-mixed: gen goes on sending to it")
		return nil
	}
	s.retired.Store(true)
	a.aborts.retire(s) // its answers in flight would not be kept (abort.go)
	left := 0
	for _, o := range a.pool.servers {
		if !o.retired.Load() {
			left++
		}
	}
	then := fmt.Sprintf("its prompts go to the %d other servers left", left)
	switch left {
	case 0:
		then = "it was the last server left: gen stops"
	case 1:
		then = "its prompts go to the other server left"
	}
	a.ctl.logf("gen: %s came back as another server (%s): gen sends it nothing more in this run; %s", s.name, diff, then)
	a.identityEvent(s, diff+"; gen sends it nothing more in this run")
	if left == 0 {
		a.ctl.abort(&stopError{msg: fmt.Sprintf("%s came back as another server (what differs: %s), and no other server is left", s.name, diff),
			hint: "a run keeps one server identity: restart it as it was and run the same command again (nothing is lost), or run again with --allow-mixed to answer the rest with the new one ('gendex check' then reports the datasets as mixed)"})
	}
	return errRetired
}

// restartSeen is the scraper's word that s was restarted while up, with
// no request to it failed (its /metrics counters went back, or its start
// time changed: scraper.checkRestart): its identity is read again, as
// when it comes back from a down, in the background (learn, then
// checkIdentity), so that a server restarted as another model between
// two requests is not sent the rest as if it were the same one.
func (a *asker) restartSeen(s *server, why string) {
	if s.retired.Load() || a.ctl.reqs == nil || a.ctl.reqs.Err() != nil {
		return
	}
	a.ctl.logf("gen: %s was restarted (%s): reading what it serves again", s.name, why)
	go func() {
		if err := a.learn(a.ctl.reqs, s); err != nil && !errors.Is(err, errRetired) && !a.ctl.stopping() {
			a.ctl.logf("gen: %s: reading it again after its restart: %v", s.name, err)
		}
	}()
}

func (a *asker) identityEvent(s *server, detail string) {
	if a.mon != nil {
		a.mon.event(time.Now().UnixMilli(), s.name, EventIdentity, detail)
	}
}
