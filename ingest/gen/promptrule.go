package gen

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"gendex/ingest"
	"gendex/store"
)

// The prompt rule of a dataset's answers ("gen.prompt" in their
// provenance): gen's keys (builtinPromptRule) or the --prompt path. A
// resume whose rule differs from the one the dataset's answers were read
// by is a difference only where the two rules read a line at different
// places: over lines of one shape (both hold text, the first run sent
// "text", the resume would send "question") it is refused. When no line
// of the dataset's prompts files holds a prompt for both rules at other
// places (say, the lines the earlier rule could not read at all, read by
// the --prompt that names their key), the two are one rule, the earlier
// one first: its answers record it extended, "E; else P", and a rule is
// one way with every rule its steps start with (samePromptRule), in gen's
// comparison and in check's made_by alike.

// ruleElse joins the steps of an extended prompt rule.
const ruleElse = "; else "

// samePromptRule reports whether prompt rules a and b read every line
// alike: the steps of one start with all those of the other.
func samePromptRule(a, b string) bool {
	sa, sb := strings.Split(a, ruleElse), strings.Split(b, ruleElse)
	if len(sa) > len(sb) {
		sa, sb = sb, sa
	}
	for i := range sa {
		if sa[i] != sb[i] {
			return false
		}
	}
	return true
}

// readsAt is where the prompt rule step (one of an extended rule's) finds
// line's prompt: the key of gen's it reads, or the --prompt path ("" for
// none).
func readsAt(line []byte, step string) string {
	var path []string
	if step != builtinPromptRule {
		path = strings.Split(step, ".")
	}
	sh := classify(line, path)
	switch {
	case sh > lineConvos:
		return ""
	case path != nil:
		return step
	}
	return [...]string{lineIDs: "input_ids", lineText: "text", lineMessages: "messages", lineConvos: "conversations"}[sh]
}

// ruleReadsAt is where the steps of a prompt rule, the first that finds
// one, find line's prompt ("" for none).
func ruleReadsAt(line []byte, steps []string) string {
	for _, s := range steps {
		if at := readsAt(line, s); at != "" {
			return at
		}
	}
	return ""
}

// earlierPromptRule is the rule the answers of makers were read by: the
// widest of their "gen.prompt" rules when each of the others is one way
// with it, "" when none says one or they are not one way.
func earlierPromptRule(made []store.Maker) string {
	widest := ""
	for _, mk := range made {
		var p struct {
			Gen struct {
				Prompt string `json:"prompt"`
			} `json:"gen"`
		}
		if json.Unmarshal(mk.Provenance, &p) != nil || p.Gen.Prompt == "" {
			continue
		}
		if widest != "" && !samePromptRule(widest, p.Gen.Prompt) {
			return ""
		}
		if len(p.Gen.Prompt) > len(widest) {
			widest = p.Gen.Prompt
		}
	}
	return widest
}

// choosePromptRules gives each dataset the prompt rule its answers of
// this run record (dsRun.promptRule): the run's own, or the rule its
// answers were read by extended with it, when reading all its prompt
// lines finds none the two read at other places; when some are,
// dsRun.promptClash says how many and the first.
func (fe *feeder) choosePromptRules() error {
	now := builtinPromptRule
	if p := fe.cfg.Paths.Prompt; p != "" {
		now = p
	}
	for _, ds := range fe.sets {
		ds.promptRule = now
		then := earlierPromptRule(ds.makers.made)
		if then == "" || samePromptRule(then, now) {
			continue
		}
		clash, err := promptClash(ds.Prompts, strings.Split(then, ruleElse), now)
		switch {
		case err != nil:
			return err
		case clash != "":
			ds.promptClash = clash
		case contains(strings.Split(then, ruleElse), now):
			ds.promptRule = then
		default:
			ds.promptRule = then + ruleElse + now
		}
		if ds.promptClash == "" {
			fe.ctl.logf("gen: %s: its answers' prompts were read by %q; no prompt line holds one for both it and %q at other keys: one way, this run's answers record %q",
				ds.Name, then, now, ds.promptRule)
		}
	}
	return nil
}

// promptClash reads every line of files and says how many hold a prompt
// for the earlier rule's steps and for now at other places, and the
// first ("" for none).
func promptClash(files []string, then []string, now string) (string, error) {
	var n int64
	var first string
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		_, err = ingest.ReadLines(f, func(line []byte, no int64) error {
			a, b := ruleReadsAt(line, then), readsAt(line, now)
			if a != "" && b != "" && a != b {
				if n++; first == "" {
					first = fmt.Sprintf("%s:%d, at %s before, at %s now", path, no, a, b)
				}
			}
			return nil
		})
		f.Close()
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", path, err)
		}
	}
	if n == 0 {
		return "", nil
	}
	return fmt.Sprintf("%s a prompt for both rules, at other keys (the first: %s)", counted(n, "prompt line holds", "prompt lines hold"), first), nil
}
