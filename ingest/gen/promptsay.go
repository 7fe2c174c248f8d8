package gen

import (
	"errors"
	"fmt"
	"strings"

	"gendex/store"
)

// What gen says of prompt lines it cannot send (see promptshape.go).

// sayShapes says, before the first request, each dataset with prompts to
// answer whose lines are of more than one shape (how many of each), or of
// a shape gen cannot send (their keys, and the flags that read them); when
// no dataset with prompts to answer has a line gen can send, nothing is:
// the run stops here.
func (fe *feeder) sayShapes(todo int64) error {
	if todo == 0 {
		return nil
	}
	sendable, unsendable := false, false
	for _, ds := range fe.sets {
		sc := ds.scan
		if sc == nil || ds.todo == 0 {
			continue
		}
		sendable = sendable || sc.sendable() > 0
		unsendable = unsendable || sc.unsendable() > 0
		var parts []string
		for sh := lineIDs; sh < lineBad; sh++ {
			if n := sc.counts[sh]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, lineShapeNames[sh]))
			}
		}
		mix, first := "", ""
		if sc.partial { // a large set: the rest are counted as they are sent
			first = "first "
		}
		if len(parts) > 1 {
			mix = fmt.Sprintf("its %s%d prompt lines are of %d shapes: %s. ", first, sc.lines, len(parts), strings.Join(parts, ", "))
		}
		switch n := sc.unsendable(); {
		case n == 0 && mix != "":
			fe.ctl.logf("gen: %s: %s", ds.Name, strings.TrimSuffix(mix, ". "))
		case n == sc.lines:
			fe.ctl.logf("gen: %s: none of its %d prompt lines holds a prompt gen can send: %s. %s",
				ds.Name, sc.lines, fe.unsendableText(ds), unsentNote)
		case n > 0:
			fe.ctl.logf("gen: %s: %sThe %d that gen cannot send: %s. %s", ds.Name, mix, n, fe.unsendableText(ds), unsentNote)
			if sc.partial {
				fe.ctl.logf("gen: %s: its other prompt lines are read as they are sent; the summary counts those not sent for their shape", ds.Name)
			}
		}
	}
	if unsendable && !sendable {
		return errors.New("no prompt was sent: the prompts to answer hold none gen can send (see above); run gen again with --prompt PATH (and --id PATH where the id is elsewhere)")
	}
	return nil
}

const unsentNote = "Those without an answer are not sent: they stay to go, neither answered nor failed, until a run reads them with --prompt PATH"

// unsendableText says what the lines of ds that gen cannot send hold
// and the flags that read them.
func (fe *feeder) unsendableText(ds *dsRun) string {
	sc := ds.scan
	var b strings.Builder
	fmt.Fprintf(&b, "their keys are %s (the first: %s)", strings.Join(sc.keys, ", "), sc.firstAt)
	if n := sc.counts[lineMany]; n > 0 {
		fmt.Fprintf(&b, "; %d hold more than one of input_ids, text, messages and conversations", n)
	}
	if p := fe.cfg.Paths.Prompt; p != "" {
		fmt.Fprintf(&b, "; --prompt %s finds no prompt in them", p)
		return b.String()
	}
	eg := ""
	if c := promptCandidate(sc.example); c != "" {
		eg = "; e.g. --prompt " + c
	}
	fmt.Fprintf(&b, "; --prompt PATH tells gen which key holds the prompt (text, chat messages or conversations%s)", eg)
	if c := idCandidate(sc.example); c != "" && fe.cfg.Paths.ID == "" && fe.storedIDPath(ds) == "" {
		fmt.Fprintf(&b, ", and --id PATH where the id is (e.g. --id %s)", c)
	}
	return b.String()
}

// storedIDPath is the id path the index keeps for ds's first prompts
// file ("" for none).
func (fe *feeder) storedIDPath(ds *dsRun) string {
	var p string
	fe.db.View(func(v *store.View) error {
		st, _, err := v.File(ds.Prompts[0])
		p = st.IDPath
		return err
	})
	return p
}

// idCandidate is a path in line that looks like the id's, when the line
// has no top-level id or custom_id: a key named id, uid, uuid, or ending
// in _id, at the top or one level down ("" for none).
func idCandidate(line []byte) string {
	top := objectKeys(line)
	if contains(top, "id") || contains(top, "custom_id") {
		return ""
	}
	idLike := func(k string) bool {
		return k == "id" || k == "uid" || k == "uuid" || k == "idx" || strings.HasSuffix(k, "_id")
	}
	for _, k := range top {
		if idLike(k) {
			return k
		}
	}
	for _, k := range top {
		v, _ := valueAt(line, []string{k})
		if v == nil || v[0] != '{' {
			continue
		}
		for _, sub := range objectKeys(v) {
			if idLike(sub) {
				return k + "." + sub
			}
		}
	}
	return ""
}

// promptCandidate is a path in line that holds what gen could send (a
// string, or a list of turns), at the top or one level down, a key
// named like a prompt first ("" for none).
func promptCandidate(line []byte) string {
	var found []string
	add := func(path []string) {
		v, _ := valueAt(line, path)
		if v != nil && valueShape(v) != lineNone && !strings.HasSuffix(path[len(path)-1], "id") {
			found = append(found, strings.Join(path, "."))
		}
	}
	for _, k := range objectKeys(line) {
		add([]string{k})
		if v, _ := valueAt(line, []string{k}); v != nil && v[0] == '{' {
			for _, sub := range objectKeys(v) {
				add([]string{k, sub})
			}
		}
	}
	for _, f := range found {
		for _, word := range []string{"prompt", "question", "instruction", "input", "query", "conversation", "dialog", "messages", "turns"} {
			if strings.Contains(strings.ToLower(f), word) {
				return f
			}
		}
	}
	if len(found) > 0 {
		return found[0]
	}
	return ""
}

// unsentText is the summary's line for a dataset whose prompts the run
// did not send for their shape ("" for none).
func (ds *dsRun) unsentText() string {
	if ds.scan == nil {
		return ""
	}
	n := ds.scan.unsent.Load()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  %s: %s, no prompt gen can send in their lines (see above): still to go, neither answered nor failed", ds.Name, counted(n, "prompt not sent for its shape", "prompts not sent for their shape"))
}

// leftUnsent is the error a run ends in (after its summary) when it left
// prompts unsent for their shape, or sent nothing at all while prompts
// are missing: a script must not take either for done.
func (fe *feeder) leftUnsent(sum *Summary) error {
	var unsent, fed int64
	for _, ds := range fe.sets {
		if ds.scan != nil {
			unsent += ds.scan.unsent.Load()
			fed += ds.scan.fed.Load()
		}
	}
	if unsent > 0 {
		return fmt.Errorf("%s (still to go): their lines hold no prompt gen can send (see above); run gen again with --prompt PATH (and --id PATH where the id is elsewhere)",
			counted(unsent, "prompt not sent for its shape", "prompts not sent for their shape"))
	}
	if fed > 0 || sum.Interrupted || sum.Responses+sum.Errors > 0 || fe.cfg.Redo != nil {
		return nil
	}
	var missing uint64
	fe.db.View(func(v *store.View) error {
		for _, ds := range fe.sets {
			if s, err := ds.summary(v); err == nil {
				missing += s.MissingRaw()
			}
		}
		return nil
	})
	if missing > 0 {
		return fmt.Errorf("no prompt was sent, yet %d are missing: the prompts files and the index do not agree on their ids; run gendex ingest on the datasets, then gen again (and report it: gen should have found them)", missing)
	}
	return nil
}

// Unsendable reports whether a prompt line holds no prompt gen sends by
// its own keys (none of input_ids, text, messages and conversations, or
// more than one), as the feeder decides it without --prompt, and a path
// in the line that holds one, for --prompt ("" for none). Such a prompt
// is not sent: it stays to go, and check's fix for it is gen --prompt.
func Unsendable(line []byte) (unsendable bool, promptPath string) {
	switch classify(line, nil) {
	case lineNone, lineMany:
		return true, promptCandidate(line)
	}
	return false, ""
}
