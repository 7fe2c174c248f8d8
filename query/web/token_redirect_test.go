package web_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// askRaw sends target as it is on the request line (no client cleans or
// escapes it first) and returns the response, its body closed.
func askRaw(t *testing.T, addr, target string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 30*time.Second) // a guard, not a measure
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, addr)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	resp.Body.Close()
	return resp
}

// TestTokenRedirectStaysOnHost: ?token= sets the cookie and sends the
// browser on to the same page without the token, always a path on this
// host: a request path a browser would read as another host's address
// (//evil.example/x, /\evil.example, their encoded forms) is never the
// Location.
func TestTokenRedirectStaysOnHost(t *testing.T) {
	srv := newSite(t, "s3cret")
	addr := srv.Listener.Addr().String()
	base, _ := url.Parse(srv.URL + "/")
	for _, c := range []struct{ path, want string }{
		{"/", "/"},
		{"/dataset?d=d&", "/dataset?d=d"},
		{"/answer?d=d&id=a&", "/answer?d=d&id=a"},
		{"//evil.example/x?", "/evil.example/x"},
		{"//evil.example?", "/evil.example"},
		{`/\evil.example?`, "/evil.example"},
		{`/\/evil.example?`, "/evil.example"},
		{"///x?", "/x"},
		{"////evil.example/x?", "/evil.example/x"},
		{"/%2F%2Fevil?", "/evil"},
		{"/%2f/evil?", "/evil"},
		{"/%5Cevil.example?", "/evil.example"},
		{"/%5C%5Cevil.example?", "/evil.example"},
		{"/%2F%5Cevil.example?", "/evil.example"},
		{"/%09/evil.example?", "/%09/evil.example"},
	} {
		target := c.path
		if !strings.Contains(target, "?") {
			target += "?"
		}
		resp := askRaw(t, addr, target+"token=s3cret")
		loc := resp.Header.Get("Location")
		to, err := base.Parse(loc)
		if resp.StatusCode != http.StatusSeeOther || loc != c.want || err != nil || to.Host != base.Host ||
			strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, `/\`) || strings.Contains(loc, `\`) {
			t.Errorf("GET %stoken=s3cret: %d, Location %q; want 303 to %q, on this host", target, resp.StatusCode, loc, c.want)
		}
		if cookies := resp.Cookies(); len(cookies) != 1 || cookies[0].Value != "s3cret" || !cookies[0].HttpOnly {
			t.Errorf("GET %stoken=s3cret: cookies %v; want the token's, HttpOnly", target, cookies)
		}
	}
	// The normal way on: the Location, with the cookie, is the page.
	jar := srv.Client()
	resp := askRaw(t, addr, "/dataset?d=d&token=s3cret")
	req, _ := http.NewRequest("GET", srv.URL+resp.Header.Get("Location"), nil)
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	page, err := jar.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK {
		t.Errorf("the Location %q with the cookie: %d, want the page", resp.Header.Get("Location"), page.StatusCode)
	}
}
