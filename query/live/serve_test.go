package live_test

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"gendex/query/live"
	"gendex/store"
)

// TestServeUsage: options that are bad or unsafe are usage errors (the
// command exits 2), and nothing is served.
func TestServeUsage(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, o := range []live.Options{
		{Queries: true},
		{Addr: "nonsense"},
		{Addr: "0.0.0.0:0"}, // beyond loopback without a token
	} {
		o.Log = io.Discard
		stop, err := live.Serve(db, o)
		if !errors.Is(err, live.ErrUsage) {
			if stop != nil {
				stop()
			}
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
	stop, err := live.Serve(db, live.Options{Addr: ":0", Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	stop()
}
