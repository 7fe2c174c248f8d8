package store

import "testing"

// TestCountPrefix counts only the ids of one stage that begin with the
// prefix, and gives the first of them in id order.
func TestCountPrefix(t *testing.T) {
	db := newDB(t)
	addAll(t, db, []rec{
		{Prompts, "r.jsonl:9", 1, 0, 1},
		{Raw, "r.jsonl:2", 2, 1, 100}, {Raw, "r.jsonl:10", 2, 1, 100}, {Raw, "r.jsonl:1", 2, 1, 100},
		{Raw, "r.jsonl", 2, 1, 100}, {Raw, "r.jsonl;1", 2, 1, 100}, {Raw, "q.jsonl:1", 2, 1, 100},
		{Errors, "r.jsonl:3", 2, Unknown, 100},
	})
	db.View(func(v *View) error {
		for _, tc := range []struct {
			stage  Stage
			prefix string
			n      int64
			first  string
		}{
			{Raw, "r.jsonl:", 3, "r.jsonl:1"},
			{Errors, "r.jsonl:", 1, "r.jsonl:3"},
			{Prompts, "r.jsonl:", 1, "r.jsonl:9"},
			{Tokenized, "r.jsonl:", 0, ""},
			{Raw, "s.jsonl:", 0, ""},
		} {
			n, first, err := v.CountPrefix("ds", tc.stage, tc.prefix)
			if err != nil || n != tc.n || first != tc.first {
				t.Errorf("CountPrefix(ds, %s, %q) = %d %q %v, want %d %q", tc.stage, tc.prefix, n, first, err, tc.n, tc.first)
			}
		}
		if n, _, err := v.CountPrefix("nope", Raw, "r.jsonl:"); n != 0 || err != nil {
			t.Errorf("CountPrefix of no dataset = %d %v", n, err)
		}
		return nil
	})
}
