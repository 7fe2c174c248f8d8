package main

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen"
	"gendex/query"
	"gendex/query/guard"
)

// rebound is the Host a page sends after it rebound its own name to the
// listener's address (DNS rebinding).
const rebound = "attacker.example"

// ask sends GET url with Host host (the URL's when "") and Authorization
// auth (none when ""), and returns the status and at most limit bytes of
// the body (a body longer than limit is read as limit+1 bytes).
func ask(t *testing.T, url, host, auth string, limit int64) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second) // a guard, not a measure
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	return resp.StatusCode, string(body)
}

var printedToken = regexp.MustCompile(`\?token=([0-9a-f]{32})$`)

// TestWebAnswersOnlyItsOwner: gendex web without $GENDEX_TOKEN makes a
// token and prints the URL with it (off a terminal, with the file that
// holds it: startWeb reads it); a request without the token is 401,
// one for another Host (a page that rebound its name to 127.0.0.1) is 421
// even with the token, and neither shows anything of the run. A tunnel
// under another port (localhost:9000) is the owner. The printed URL, pasted
// into a browser, opens the page, and the cookie it leaves serves the
// links and the charts.
func TestWebAnswersOnlyItsOwner(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "secretset"), "secretset", 6)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "8", "data")
	base, printed := startWeb(t, p, nil)
	token := tokenOf(t, base, printed)
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/"))
	answer := base + "answer?d=secretset&id=secretset-00001"

	for _, c := range []struct {
		what, url, host, auth string
		want                  int
	}{
		{"no token", base, "", "", 401},
		{"no token, an answer", answer, "", "", 401},
		{"a wrong token", answer, "", "Bearer 0123456789abcdef0123456789abcdef", 401},
		{"a rebound name, with the token", answer, rebound + ":" + port, "Bearer " + token, 421},
		{"a rebound name, with the token, the run", base, rebound + ":" + port, "Bearer " + token, 421},
		{"a rebound name, without a port", base + "live", rebound, "Bearer " + token, 421},
		{"a rebound name, ?token=", printed, rebound + ":" + port, "", 421},
	} {
		code, body := ask(t, c.url, c.host, c.auth, 1<<20)
		if code != c.want || strings.Contains(body, "secretset") || strings.Contains(body, token) {
			t.Errorf("%s: GET %s (Host %q): %d, want %d and nothing of the run\n%.300s", c.what, c.url, c.host, code, c.want, body)
		}
	}
	for _, host := range []string{"", "localhost:9000", "[::1]:" + port, "LOCALHOST:" + port} {
		if code, body := ask(t, answer, host, "Bearer "+token, 1<<20); code != 200 || !strings.Contains(body, "secretset-00001") {
			t.Errorf("the owner (Host %q): %d, want the answer's page\n%.300s", host, code, body)
		}
	}

	t.Run("browser", func(t *testing.T) {
		chromium(t)
		b := startBrowser(t)
		tb := b.newTab(1280, 800, false)
		tb.loadAs(printed, base) // pasted once; the token leaves the URL
		tb.click(`#progress a[href="/dataset?d=secretset"]`)
		tb.click(`table a[href^="/answer"]`)
		var got struct {
			H1     string
			Charts []int
		}
		tb.eval(`({H1: document.querySelector('h1').textContent})`, &got)
		if !strings.Contains(got.H1, "secretset-0000") {
			t.Errorf("after the printed URL, the links: h1 %q, want an answer of secretset", got.H1)
		}
		tb.load(base)
		waitFor(t, 30*time.Second, "the run page's charts to load", func() bool {
			tb.eval(`[...document.querySelectorAll('img[src^="/chart.svg"]')].filter(i => i.complete).map(i => i.naturalWidth)`, &got.Charts)
			return len(got.Charts) == 2
		})
		for _, w := range got.Charts {
			if w == 0 {
				t.Errorf("a chart did not load with the cookie: widths %v", got.Charts)
			}
		}
	})
}

// tokenOf returns the token in the URL gendex web printed.
func tokenOf(t *testing.T, base, printed string) string {
	t.Helper()
	m := printedToken.FindStringSubmatch(printed)
	if m == nil || !strings.HasPrefix(printed, base) {
		t.Errorf("gendex web printed %q: want its URL with ?token= and 32 hex digits, one paste", printed)
		return "none"
	}
	return m[1]
}

// writerAddr returns the loopback address a writer said it serves on,
// and the token it made, read from the file it names (off a terminal).
func writerAddr(t *testing.T, w *writer) (addr, token string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the writer never said where it listens", func() bool {
		_, rest, ok := strings.Cut(w.Stderr(), "Prometheus metrics on http://")
		addr, _, _ = strings.Cut(rest, "/metrics")
		if _, rest, ok := strings.Cut(rest, "Bearer "); ok {
			token, _, _ = strings.Cut(rest, ";")
		}
		return ok && addr != ""
	})
	if saidFile.MatchString(token) {
		token, _ = tokenInFile(t, token)
	}
	return addr, token
}

// TestWriterAnswersOnlyItsOwner: the answers on a writer's TCP port
// (ingest --follow --listen-queries) need a token even on loopback: the
// writer makes one when $GENDEX_TOKEN is unset and says it once (off a
// terminal, the file that holds it: writerAddr reads it); a
// request for another Host is 421 with nothing of the run, on /v1/query
// and /metrics alike. A port of /metrics alone stays open to a local
// Prometheus without a token, for its own Host only.
func TestWriterAnswersOnlyItsOwner(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	root := promptsRoot(t, "secretset", 10)
	w := startWriter(t, filepath.Join(t.TempDir(), "q.db"), []string{"GENDEX_TOKEN="},
		"ingest", "--follow", "--listen", "127.0.0.1:0", "--listen-queries", root)
	addr, token := writerAddr(t, w)
	if len(token) != 32 {
		t.Errorf("the writer said no token of its own for its answers:\n%s", w.Stderr())
	}
	_, port, _ := net.SplitHostPort(addr)
	q := "http://" + addr + "/v1/query?arg=show&arg=secretset&arg=p0000001&arg=--stage&arg=prompts"
	for _, c := range []struct {
		what, url, host, auth string
		want                  int
	}{
		{"no token", q, "", "", 401},
		{"a wrong token", q, "", "Bearer nope", 401},
		{"a rebound name", q, rebound + ":" + port, "Bearer " + token, 421},
		{"a rebound name, /metrics", "http://" + addr + "/metrics", rebound + ":" + port, "Bearer " + token, 421},
	} {
		code, body := ask(t, c.url, c.host, c.auth, 1<<20)
		if code != c.want || strings.Contains(body, "secretset") || strings.Contains(body, "prompt 1") {
			t.Errorf("%s: GET %s (Host %q): %d, want %d and nothing of the run\n%.300s", c.what, c.url, c.host, code, c.want, body)
		}
	}
	var code int
	var body string
	waitFor(t, 10*time.Second, "the owner, with the token, to read the prompt", func() bool {
		code, body = ask(t, q, "localhost:"+port, "Bearer "+token, 1<<20)
		return code == 200 && strings.Contains(body, "prompt 1")
	})

	m := startWriter(t, filepath.Join(t.TempDir(), "m.db"), []string{"GENDEX_TOKEN="}, "ingest", "--follow", "--listen", "127.0.0.1:0", root)
	addr, token = writerAddr(t, m)
	if token != "" {
		t.Errorf("a port of /metrics alone said a token %q", token)
	}
	if code, body := ask(t, "http://"+addr+"/metrics", "", "", 1<<20); code != 200 || !strings.Contains(body, "gendex_records") {
		t.Errorf("/metrics alone, its own Host: %d\n%.300s", code, body)
	}
	if code, body := ask(t, "http://"+addr+"/metrics", rebound, "", 1<<20); code != 421 || strings.Contains(body, "secretset") {
		t.Errorf("/metrics alone, a rebound name: %d, want 421\n%.300s", code, body)
	}
}

// TestRunawayRequestsBounded: a URL's parameters are checked, never
// parsed as flags (the chart's metric=--step=1s was plot's --step), and
// a series holds at most query.SeriesMaxRows rows per dataset for every
// caller (the web view, the CLI, the writer's socket and TCP port): a
// finer step is widened, and the answer says so.
func TestRunawayRequestsBounded(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "calm"), "calm", 6)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "8", "data")

	// The CLI: `query series --step 1s --since 8760h` would be 31 M rows.
	cli := startGendexWith(t, gendexOpts{dir: p.dir, converse: true}, p.bin, "query", "series", "--step", "1s", "--since", "8760h", "--format", "tsv")
	rows := countLines(cli, query.SeriesMaxRows+2)
	if rows > query.SeriesMaxRows+2 || !strings.Contains(cli.Stderr(), "widened to 10m") || cli.Wait() != 0 {
		t.Errorf("query series --step 1s --since 8760h: %d lines (at most %d), exit %d, stderr %q; want the step widened, said",
			rows, query.SeriesMaxRows+2, cli.Wait(), cli.Stderr())
	}

	// The web view.
	base, printed := startWeb(t, p, nil)
	token := "Bearer " + tokenOf(t, base, printed)
	for _, c := range []struct{ query, param string }{
		{"metric=--step=1s&since=240h", "metric"},
		{"metric=tokens&since=8761h", "since"},
		{"since=-1h", "since"},
		{"w=100000", "w"},
		{"w=10", "w"},
		{"metric=tokens&metric=kv", "metric"},
		{"step=1s", `"step"`},
	} {
		code, body := ask(t, base+"chart.svg?"+c.query, "", token, 64<<10)
		body = html.UnescapeString(body)
		if code != 400 || !strings.Contains(body, "bad parameter "+c.param) || len(body) > 64<<10 {
			t.Errorf("/chart.svg?%s: %d, %d bytes; want 400 naming %s\n%.300s", c.query, code, len(body), c.param, body)
		}
	}
	for _, c := range []struct{ path, param string }{
		{"dataset?d=calm&view=--sample=10000", "view"},
		{"answer?d=calm&id=calm-00001&stage=--limit", "stage"},
		{"dataset?d=calm&limit=10000", `"limit"`},
		{"?since=1s", `"since"`},
	} {
		if code, body := ask(t, base+c.path, "", token, 1<<20); code != 400 || !strings.Contains(html.UnescapeString(body), "bad parameter "+c.param) {
			t.Errorf("/%s: %d; want 400 naming %s\n%.300s", c.path, code, c.param, body)
		}
	}
	if code, body := ask(t, base+"chart.svg?metric=answers&since=8760h&w=2400", "", token, 1<<20); code != 200 || len(body) > 1<<20 || !strings.HasPrefix(body, "<svg") {
		t.Errorf("a year's chart at the widest: %d, %d bytes; want an SVG under 1 MB\n%.300s", code, len(body), body)
	}

	// The writer's Unix socket and TCP port.
	w := startWriter(t, filepath.Join(p.dir, "w.db"), []string{"GENDEX_TOKEN="}, "ingest", "--follow", "--listen", "127.0.0.1:0", "--listen-queries", filepath.Join(p.dir, "data"))
	addr, wtoken := writerAddr(t, w)
	waitFor(t, 10*time.Second, "the writer to have indexed calm", func() bool {
		_, body := ask(t, "http://"+addr+"/v1/query?arg=progress", "", "Bearer "+wtoken, 1<<20)
		return strings.Contains(body, `"calm"`)
	})
	series := "/v1/query?arg=series&arg=--step&arg=1s&arg=--since&arg=8760h"
	for _, via := range []struct {
		name string
		get  func() (int, string)
	}{
		{"tcp", func() (int, string) {
			return ask(t, "http://"+addr+series, "", "Bearer "+wtoken, 8<<20)
		}},
		{"socket", func() (int, string) {
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second) // a guard, not a measure
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gendex"+series, nil)
			resp, err := w.socketClient().Do(req)
			if err != nil {
				t.Fatalf("the socket: %v", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20+1))
			return resp.StatusCode, string(body)
		}},
	} {
		code, body := via.get()
		rows := strings.Count(body, `{"row":`)
		if code != 200 || rows > query.SeriesMaxRows || !strings.Contains(body, "widened to 10m") || !strings.Contains(body, `"end":true`) {
			t.Errorf("series --step 1s --since 8760h on the writer's %s: %d, %d rows, %d bytes; want at most %d rows, the step widened, said\n%.300s",
				via.name, code, rows, len(body), query.SeriesMaxRows, body)
		}
	}
}

// countLines counts the lines a conversation (gendexOpts.converse) writes
// on its stdout, stopping it once they pass most (a runaway answer is not
// read to its end), and waits for it to end.
func countLines(p *gendexProc, most int) int {
	// A guard, not a measure: an answer that never starts fails the test.
	timer := time.AfterFunc(90*time.Second, p.Kill)
	defer timer.Stop()
	n := 0
	lines := p.StdoutLines()
	for range lines {
		if n++; n > most {
			p.Kill()
			break
		}
	}
	go func() {
		for range lines {
		}
	}()
	p.Wait()
	return n
}

// TestFDReserveAgrees: gen's adaptive bound on requests in flight keeps
// the same file descriptors for its own files as the listeners' cap
// reserves (writerReserve), so neither counts on descriptors the other
// takes.
func TestFDReserveAgrees(t *testing.T) {
	t.Parallel()
	if gen.FDReserve != guard.DefaultReserve || writerReserve(0) != gen.FDReserve {
		t.Errorf("gen.FDReserve %d, guard.DefaultReserve %d, writerReserve(0) %d: one number", gen.FDReserve, guard.DefaultReserve, writerReserve(0))
	}
}
