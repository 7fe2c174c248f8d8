package query_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query"
)

// TestRemoteAnswersAsLocal: every question asked over the writer's socket
// gets the answer the index itself gives.
func TestRemoteAnswersAsLocal(t *testing.T) {
	db, _ := index(t, fixtureRoot)
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := query.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&query.Server{Src: db}).Serve(ctx, ln) }()
	remote, err := query.Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, args := range [][]string{
		{"progress"}, {"tokens"}, {"finish"}, {"errors"}, {"datasets"},
		{"throughput", "--window", "1h"}, {"missing", "alpha"}, {"missing", "alpha", "--stage", "tokenized"},
		{"show", "alpha", "B2_opencodeinstruct-0000017"}, {"progress", "alpha", "beta"},
	} {
		q, err := query.Parse(args)
		if err != nil {
			t.Fatal(err)
		}
		var local, viaSocket query.Collect
		if err := (query.Local{Src: db}).Ask(t.Context(), q, now, &local); err != nil {
			t.Fatal(err)
		}
		if err := remote.Ask(t.Context(), q, now, &viaSocket); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if args[0] == "throughput" { // the server's clock is its own
			local.Result.Rows, viaSocket.Result.Rows, local.Result.Total, viaSocket.Result.Total = nil, nil, nil, nil
		}
		for _, f := range []query.Format{query.JSON, query.Table, query.TSV} {
			var a, b strings.Builder
			query.Write(&a, &local.Result, query.Options{Format: f})
			query.Write(&b, &viaSocket.Result, query.Options{Format: f})
			if a.String() != b.String() || a.Len() == 0 {
				t.Errorf("%v as %v:\n local\n%s\n socket\n%s", args, f, a.String(), b.String())
			}
		}
	}
	// Errors come back as errors; usage errors as usage errors.
	q, _ := query.Parse([]string{"progress", "nope"})
	if err := remote.Ask(t.Context(), q, now, &query.Collect{}); err == nil || errors.Is(err, query.ErrUsage) {
		t.Errorf("unknown dataset over the socket: %v", err)
	}
	// A second server on the same socket is refused while the first runs.
	if _, err := query.Listen(sock); err == nil {
		t.Error("a second Listen on a served socket succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind after Serve: %v", err)
	}
	if _, err := query.Dial(t.Context(), sock); !errors.Is(err, query.ErrNoWriter) {
		t.Errorf("Dial after the writer left: %v", err)
	}
}

// TestListenReplacesStaleSocket: a socket file left by a process that died
// is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays; nobody answers
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	if _, err := query.Dial(t.Context(), sock); !errors.Is(err, query.ErrNoWriter) {
		t.Errorf("Dial on a stale socket: %v", err)
	}
	ln2, err := query.Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln2.Close()
}

func TestMetrics(t *testing.T) {
	db, _ := index(t, fixtureRoot)
	srv := &query.Server{Src: db, Extra: func(w io.Writer) { io.WriteString(w, "gendex_in_flight{server=\"s\"} 3\n") }}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := model(t, fixtureRoot)
	for _, want := range []string{
		"# TYPE gendex_records gauge",
		fmt.Sprintf(`gendex_records{dataset="alpha",stage="raw"} %d`, len(m["alpha"].raw)),
		`gendex_unknown_token_records{dataset="alpha"} 1`,
		`gendex_in_flight{server="s"} 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// Every sample line is "name{labels} integer".
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasPrefix(f[0], "gendex_") {
			t.Errorf("malformed sample %q", line)
		}
	}
}

func TestFiles(t *testing.T) {
	db, _ := index(t, fixtureRoot)
	r := answer(t, db, time.Now(), "files", "alpha")
	if len(r.Rows) == 0 {
		t.Fatal("no files")
	}
	for _, row := range r.Rows {
		if row[0] != "alpha" {
			t.Errorf("files alpha lists %v", row)
		}
		path := row[2].(string)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// Everything was read, up to the end (or an unfinished last line).
		indexed, pending := row[8].(int64), row[9].(int64)
		if indexed+pending != fi.Size() || indexed <= 0 {
			t.Errorf("%s: indexed %d + pending %d != size %d", path, indexed, pending, fi.Size())
		}
	}
}
