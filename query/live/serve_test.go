package live_test

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
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

// TestServeSaysTokenAsTold: a token Serve makes is named in its log line
// as SayToken says, never itself; when SayToken fails, Serve fails with
// its error and leaves nothing served (the socket is free again).
func TestServeSaysTokenAsTold(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var log strings.Builder
	made := ""
	stop, err := live.Serve(db, live.Options{Addr: "127.0.0.1:0", Queries: true, Log: &log,
		SayToken: func(token string) (string, error) { made = token; return "$(cat FILE)", nil }})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if len(made) != 32 || strings.Contains(log.String(), made) || !strings.Contains(log.String(), "Bearer $(cat FILE);") {
		t.Errorf("made %q, logged %q; want the token named as SayToken said, never itself", made, log.String())
	}

	log.Reset()
	refused := errors.New("no place for the token")
	if stop, err := live.Serve(db, live.Options{Addr: "127.0.0.1:0", Queries: true, Log: &log,
		SayToken: func(string) (string, error) { return "", refused }}); !errors.Is(err, refused) || log.Len() > 0 {
		if stop != nil {
			stop()
		}
		t.Errorf("SayToken failing: %v, logged %q; want its error, nothing logged", err, log.String())
	}
	stop, err = live.Serve(db, live.Options{Log: io.Discard})
	if err != nil {
		t.Fatalf("after a Serve that failed, the socket is still held: %v", err)
	}
	stop()
}
