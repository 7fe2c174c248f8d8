package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestEndpointURLs: every request goes to the server's base path joined
// with the endpoint's path, as URL paths join, with the --server URL's
// query string kept (a router's prefix, a gateway's key); a trailing "/"
// or "/v1" of the base path goes.
func TestEndpointURLs(t *testing.T) {
	var mu sync.Mutex
	var got []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "{}")
	}))
	defer hs.Close()
	for _, c := range []struct{ base, want string }{
		{hs.URL, "/health"},
		{hs.URL + "/", "/health"},
		{hs.URL + "/v1", "/health"},
		{hs.URL + "/v1/", "/health"},
		{hs.URL + "/sglang", "/sglang/health"},
		{hs.URL + "/sglang/v1/", "/sglang/health"},
		{hs.URL + "?key=s3cret", "/health?key=s3cret"},
		{hs.URL + "/?key=s3cret", "/health?key=s3cret"},
		{hs.URL + "/v1?key=s3cret", "/health?key=s3cret"},
		{hs.URL + "/a/b/v1/?key=s3cret&x=1#frag", "/a/b/health?key=s3cret&x=1"},
		{hs.URL + "/with%20space?k=a%2Fb", "/with%20space/health?k=a%2Fb"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		c2 := New(c.base, Options{})
		if err := c2.Health(t.Context()); err != nil {
			t.Errorf("New(%q).Health: %v", c.base, err)
			continue
		}
		mu.Lock()
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("New(%q): requests %q, want [%q]", c.base, got, c.want)
		}
		mu.Unlock()
	}
}

// TestEndpointURLNotAURL: a --server that is no URL fails its request with
// a message that says what a server URL looks like, and never prints it.
func TestEndpointURLNotAURL(t *testing.T) {
	c := New("http://user:pw@[::1", Options{})
	err := c.Health(t.Context())
	if err == nil {
		t.Fatal("Health on a URL that does not parse: no error")
	}
	if msg := err.Error(); !strings.Contains(msg, "check --server") || strings.Contains(msg, "pw") {
		t.Errorf("error %q should say to check --server, without the URL's password", msg)
	}
}
