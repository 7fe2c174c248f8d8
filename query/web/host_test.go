package web_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestPagesOnlyForOwnHost: the pages answer only requests for their own
// Host (localhost, a loopback address, any port): a page whose name was
// rebound to 127.0.0.1 (DNS rebinding) gets 421 even with the token, and
// nothing of the run.
func TestPagesOnlyForOwnHost(t *testing.T) {
	srv := newSite(t, "s3cret")
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ask := func(path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{"rebound.example:" + port, "rebound.example", "127.0.0.2.example:" + port} {
		for _, path := range []string{"/", "/answer?d=d&id=c", "/chart.svg"} {
			if code, body := ask(path, host); code != http.StatusMisdirectedRequest || strings.Contains(body, "regenerated one") || strings.Contains(body, "Progress") {
				t.Errorf("GET %s, Host %q: %d, want 421 and nothing of the run\n%.300s", path, host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "localhost:9000", "[::1]:" + port} {
		if code, body := ask("/answer?d=d&id=c", host); code != http.StatusOK || !strings.Contains(body, "regenerated one") {
			t.Errorf("the owner (Host %q): %d, want the answer's page\n%.300s", host, code, body)
		}
	}
}
