package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser drives a headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ended by a NUL byte, commands on
// the browser's fd 3, replies and events on its fd 4), so a test follows
// links, runs the page's own script and reads its DOM as a user's browser
// would, with nothing but the standard library.
type browser struct {
	t    *testing.T
	cmd  *exec.Cmd
	send *os.File

	mu       sync.Mutex
	next     int
	pending  map[int]chan cdpMessage
	requests []string // every URL a page of this browser asked for
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// chromium returns the path of a Chromium, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "chromium-headless-shell", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium (Debian: apt-get install chromium; .ci/run installs it)")
	return ""
}

// startBrowser starts a headless Chromium for the test's life.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromium(t)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars", "--user-data-dir="+filepath.Join(t.TempDir(), "profile"), "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, evW} // fd 3: what it reads; fd 4: what it writes
	// Its own process group, so that the renderer, GPU and crash-handler
	// children it forks end with it: killing the main process alone left
	// them writing to the profile while t.TempDir's cleanup removed it
	// ("directory not empty", seen once in a fresh clone's CI).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmdR.Close()
	evW.Close()
	b := &browser{t: t, cmd: cmd, send: cmdW, pending: map[int]chan cdpMessage{}}
	go b.read(bufio.NewReader(evR))
	t.Cleanup(func() { stopBrowser(cmd, cmdW) })
	return b
}

// stopBrowser ends Chromium and every process of its group before the
// test's folders are removed: it closes the DevTools pipe (Chromium exits
// on its own then), gives it 5 s, kills the group, and waits until no
// process of the group is left (at most 5 s more; a zombie holds no file).
func stopBrowser(cmd *exec.Cmd, pipe *os.File) {
	pipe.Close()
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
	}
	pgid := cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH || groupOnlyZombies(pgid) {
			return
		}
	}
}

// groupOnlyZombies reports whether every process left in group pgid has
// exited (a zombie its new parent has not reaped yet holds no file open).
func groupOnlyZombies(pgid int) bool {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			return false
		}
	}
	return true
}

func (b *browser) read(r *bufio.Reader) {
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.pending[m.ID]; ch != nil {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else if m.Method == "Network.requestWillBeSent" {
			var p struct {
				Request struct {
					URL string `json:"url"`
				} `json:"request"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				b.requests = append(b.requests, p.Request.URL)
			}
		}
		b.mu.Unlock()
	}
}

// call sends one command (in a page's session, or the browser's when
// session is "") and returns its result.
func (b *browser) call(session, method string, params any) json.RawMessage {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	p, _ := json.Marshal(params)
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, SessionID: session, Params: p})
	if _, err := b.send.Write(append(msg, 0)); err != nil {
		b.t.Fatalf("chromium: %s: %v", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			b.t.Fatalf("chromium: %s: %s", method, m.Error.Message)
		}
		return m.Result
	case <-time.After(60 * time.Second): // a hung browser fails, never stalls
		b.t.Fatalf("chromium: %s: no reply in 60s", method)
	}
	return nil
}

// Requests returns every URL the browser's pages asked for so far.
func (b *browser) Requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.requests...)
}

// tab is one page of the browser.
type tab struct {
	b       *browser
	session string
}

// newTab opens a page with the network watched.
func (b *browser) newTab(width, height int, mobile bool) *tab {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	json.Unmarshal(b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}), &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	json.Unmarshal(b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}), &att)
	tb := &tab{b: b, session: att.SessionID}
	tb.call("Page.enable", nil)
	tb.call("Runtime.enable", nil)
	tb.call("Network.enable", nil)
	tb.call("Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})
	return tb
}

func (tb *tab) call(method string, params any) json.RawMessage {
	tb.b.t.Helper()
	return tb.b.call(tb.session, method, params)
}

// eval runs a script in the page and decodes its value into v (nil: drop it).
func (tb *tab) eval(expr string, v any) {
	tb.b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	json.Unmarshal(tb.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}), &r)
	if r.ExceptionDetails != nil {
		tb.b.t.Fatalf("in the page: %s: %s %s", expr, r.ExceptionDetails.Text, r.ExceptionDetails.Exception.Description)
	}
	if v != nil {
		if err := json.Unmarshal(r.Result.Value, v); err != nil {
			tb.b.t.Fatalf("in the page: %s: %v (value %s)", expr, err, r.Result.Value)
		}
	}
}

// load goes to url and waits for the page to have loaded.
func (tb *tab) load(url string) {
	tb.b.t.Helper()
	tb.call("Page.navigate", map[string]any{"url": url})
	tb.waitLoaded(func(href string) bool { return href == url })
}

// loadAs goes to url and waits for the page to have loaded at want (the
// page url redirects to).
func (tb *tab) loadAs(url, want string) {
	tb.b.t.Helper()
	tb.call("Page.navigate", map[string]any{"url": url})
	tb.waitLoaded(func(href string) bool { return href == want })
}

// click clicks the element a selector finds and waits for the page it
// leads to.
func (tb *tab) click(selector string) {
	tb.b.t.Helper()
	var before string
	tb.eval(`location.href`, &before)
	var found bool
	tb.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true })()`, selector), &found)
	if !found {
		var body string
		tb.eval(`document.body.innerText`, &body)
		tb.b.t.Fatalf("no %s on %s:\n%s", selector, before, body)
	}
	tb.waitLoaded(func(href string) bool { return href != before })
}

func (tb *tab) waitLoaded(at func(href string) bool) {
	tb.b.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var st struct{ Href, State string }
		tb.eval(`({Href: location.href, State: document.readyState})`, &st)
		if at(st.Href) && st.State == "complete" {
			return
		}
		if time.Now().After(deadline) {
			tb.b.t.Fatalf("the page did not load: at %s, %s", st.Href, st.State)
		}
	}
}

// screenshot writes a PNG of the page as it is.
func (tb *tab) screenshot(path string) {
	tb.b.t.Helper()
	var r struct {
		Data string `json:"data"`
	}
	json.Unmarshal(tb.call("Page.captureScreenshot", map[string]any{"format": "png"}), &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		tb.b.t.Fatalf("screenshot: not a PNG (%v)", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.b.t.Fatal(err)
	}
}

// browserContext is a deadline for a browser test's processes.
func browserContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
