package gen

// gen --redo FILE: which listed ids are asked again is decided by content,
// never by FILE's timestamps (a list made before the run, copied with
// cp -p or rsync -a, checked out by git, or a clock stepped back, asks its
// ids all the same). The redo of a list is held in each dataset from its
// first start (store.RedoMark: the digest of its ids and a tag of its
// own) and writes its tag in every answer line it writes ("redo_tag",
// beside "redo":true). A listed id is done when its newest line carries
// the tag of the redo the dataset holds for the same ids: a redo stopped
// at any moment and started again with the same ids asks only the rest,
// and once it is over, nothing. Another list (other ids) is a new redo,
// with a new tag: it asks all its ids again, whoever answered them before.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gendex/store"
)

// listDigest is what makes two lists the same redo: their ids (with the
// dataset each names, if any), whatever their order, repeats, header or
// blank lines.
func listDigest(entries []redoEntry) string {
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.dataset + "\t" + e.id + "\n"
	}
	slices.Sort(keys)
	h := sha256.New()
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			h.Write([]byte(k))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// newRedoTag returns a tag for a new redo of a list.
func newRedoTag() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// pickList is pickRedo's choice for a list of ids: in each dataset, the
// listed ids with an answer, but those whose newest line is this redo's
// (the one the dataset holds for the same ids, see above).
func (rc *redoChooser) pickList(v *store.View, red *Redo, byName map[string]*dsRun) error {
	tag := newRedoTag()
	for _, ds := range rc.sets {
		m, ok, err := v.RedoMark(ds.Name)
		if err != nil {
			return err
		}
		if ok && m.List == red.digest {
			ds.redo.tag = m.Tag // started before: it goes on
		} else {
			ds.redo.tag, ds.redo.newMark = tag, true
		}
	}
	var unknown []string
	unknownN := 0
	seen := map[redoEntry]bool{}
	files := turnFiles{} // the answer files, each opened once
	defer files.close()
	for _, e := range red.entries {
		e = rc.unitEntry(e, byName)
		if seen[redoEntry{dataset: e.dataset, id: e.id, sample: e.sample}] {
			continue
		}
		seen[redoEntry{dataset: e.dataset, id: e.id, sample: e.sample}] = true
		var sets []*dsRun
		if e.dataset != "" {
			if ds := byName[e.dataset]; ds != nil {
				sets = append(sets, ds)
			}
		} else {
			sets = rc.sets
		}
		found := false
		for _, ds := range sets {
			if _, ok, err := v.Get(ds.Name, store.Prompts, e.id); err != nil {
				return err
			} else if !ok {
				continue
			}
			found = true
			for _, key := range rc.unitKeys(e) {
				rec, answered, err := v.Get(ds.Name, store.Raw, key)
				switch {
				case err != nil:
					return err
				case !answered:
					ds.redo.notAnswered.Add(1)
				case !ds.redo.newMark && redoTagOf(readLine(v, &rec, files)) == ds.redo.tag:
					ds.redo.done.Add(1) // its newest line is this redo's
				default:
					ds.redo.ids[key] = true
				}
			}
		}
		if !found {
			unknownN++
			if len(unknown) < 5 {
				where := e.id
				if e.dataset != "" {
					where = e.dataset + "\t" + e.id
				}
				unknown = append(unknown, fmt.Sprintf("%s:%d: %q", red.Path, e.line, where))
			}
		}
	}
	if unknownN > 0 {
		names := make([]string, len(rc.sets))
		for i, ds := range rc.sets {
			names[i] = ds.Name
		}
		sort.Strings(names)
		return fmt.Errorf("%w %s: %d ids are not prompts of this run's datasets (%s): %s; nothing was sent",
			ErrRedoUsage, red.Path, unknownN, strings.Join(names, ", "), strings.Join(unknown, ", "))
	}
	return nil
}

// markList holds, in tx, the redo of a list of each dataset that starts
// one and asks something again (the others keep the one they hold).
func (rc *redoChooser) markList(tx *store.Tx, ds *dsRun) error {
	if rc.cfg.Redo == nil || ds.redo == nil || !ds.redo.newMark || len(ds.redo.ids) == 0 {
		return nil
	}
	return tx.SetRedoMark(ds.Name, store.RedoMark{List: rc.cfg.Redo.digest, Tag: ds.redo.tag})
}

// redoTagOf returns the "redo_tag" of an answer line ("" for none, or a
// line that is not a redo's).
func redoTagOf(line []byte) string {
	if !bytes.Contains(line, []byte(`"redo_tag"`)) {
		return ""
	}
	var l struct {
		Redo bool   `json:"redo"`
		Tag  string `json:"redo_tag"`
	}
	if json.Unmarshal(line, &l) != nil || !l.Redo {
		return ""
	}
	return l.Tag
}
