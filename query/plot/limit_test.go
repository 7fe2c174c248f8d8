package plot

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
)

// TestPlotLimit: plot limit draws gen's limit per server, the total
// first, from the samples that keep it (a server whose samples keep none
// has no value known); every chart marks each limit change (↕) with its
// change in the label and gen's reason in the detail, beside the downs;
// and an index whose samples keep no limit has nothing to plot, said.
func TestPlotLimit(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "p.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err = db.Update(func(tx *store.Tx) error {
		for i := range 120 {
			at := t0.Add(time.Duration(i) * time.Second).UnixMilli()
			limit := int64(128)
			if i >= 60 {
				limit = 512
			}
			s := &store.ServerSample{Time: at, Up: true, Run: t0.UnixMilli(), Limit: limit, InFlight: limit}
			if err := tx.PutServerSample("http://gpu1:30000", s); err != nil {
				return err
			}
			if err := tx.PutServerSample("http://gpu2:30000", &store.ServerSample{Time: at, Up: true, Run: t0.UnixMilli()}); err != nil {
				return err
			}
		}
		for _, e := range []store.Event{
			{Time: t0.Add(30 * time.Second).UnixMilli(), Server: "http://gpu2:30000", Name: "down", Detail: "2 requests in flight"},
			{Time: t0.Add(60 * time.Second).UnixMilli(), Server: "http://gpu1:30000", Name: "limit", Detail: "128 -> 512: room (running 128 of 1024, no queue)"},
			{Time: t0.Add(70 * time.Second).UnixMilli(), Server: "http://gpu1:30000", Name: "stalled"}, // not marked
		} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := query.Local{Src: db}
	now := t0.Add(120 * time.Second)
	a, err := New("limit", 0)
	if err != nil {
		t.Fatal(err)
	}
	a.step = 30 * time.Second
	c, err := a.Chart(t.Context(), ask, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range c.Series {
		var v []string
		for _, x := range s.Values {
			v = append(v, query.Fixed{V: x, Prec: 0}.String())
		}
		got = append(got, s.Name+" "+strings.Join(v, " "))
	}
	want := "TOTAL 128 128 512 512|gpu1:30000 128 128 512 512|gpu2:30000 NaN NaN NaN NaN"
	if strings.Join(got, "|") != want || !strings.HasPrefix(c.Title, "gen's in-flight limit, total and per server") {
		t.Errorf("plot limit: %q\n%s\nwant\n%s", c.Title, strings.Join(got, "|"), want)
	}
	var marks []string
	for _, m := range c.Marks {
		marks = append(marks, m.Kind+": "+m.Label+" ("+m.Detail+")")
	}
	wantMarks := "down: gpu2:30000 down (2 requests in flight)|limit: gpu1:30000 limit 128→512 (128 -> 512: room (running 128 of 1024, no queue))"
	if strings.Join(marks, "|") != wantMarks {
		t.Errorf("marks:\n%s\nwant\n%s", strings.Join(marks, "|"), wantMarks)
	}
	// Asked for one server, the chart marks only its events.
	a.names = []string{"http://gpu1:30000"}
	if c, err = a.Chart(t.Context(), ask, now, 100); err != nil || len(c.Marks) != 1 || c.Marks[0].Kind != "limit" {
		t.Errorf("plot limit http://gpu1:30000: %v, marks %+v", err, c.Marks)
	}
	// Only gpu2, whose samples keep no limit: nothing to plot.
	a.names = []string{"http://gpu2:30000"}
	_, err = a.Chart(t.Context(), ask, now, 100)
	if err == nil || !strings.Contains(err.Error(), "nothing to plot: no server sample in the index keeps gen's limit") {
		t.Errorf("plot limit of a server without one: %v", err)
	}
}

// TestMarkWhat: a limit mark's label says the change, from gen's detail;
// a detail it cannot read says only the kind.
func TestMarkWhat(t *testing.T) {
	for _, c := range [][3]string{
		{"limit", "1040 -> 780: preemptions (37 in 5s)", "limit 1040→780"},
		{"limit", "128->512", "limit 128→512"},
		{"limit", "", "limit"},
		{"limit", "raised: room", "limit"},
		{"down", "12 -> 3: whatever", "down"},
	} {
		if got := markWhat(c[0], c[1]); got != c[2] {
			t.Errorf("markWhat(%q, %q) = %q; want %q", c[0], c[1], got, c[2])
		}
	}
}
