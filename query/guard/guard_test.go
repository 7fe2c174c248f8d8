package guard_test

import (
	"os"
	"strings"
	"testing"

	"gendex/query/guard"
)

// TestHostsAllows: a listener answers its own names, whatever the port,
// and no other name: a rebound page sends its own.
func TestHostsAllows(t *testing.T) {
	machine, _ := os.Hostname()
	for _, c := range []struct {
		listen string
		host   string
		want   bool
	}{
		{"127.0.0.1:8765", "127.0.0.1:8765", true},
		{"127.0.0.1:8765", "localhost:9000", true}, // a tunnel under another port
		{"127.0.0.1:8765", "LocalHost.", true},
		{"127.0.0.1:8765", "[::1]:8765", true},
		{"127.0.0.1:8765", "::1", true},
		{"127.0.0.1:8765", "10.1.2.3:8765", true}, // an IP is no name to rebind
		{":8765", "127.0.0.1", true},
		{"127.0.0.1:8765", "attacker.example:8765", false},
		{"127.0.0.1:8765", "attacker.example", false},
		{"127.0.0.1:8765", "localhost.attacker.example:8765", false},
		{"127.0.0.1:8765", "127.0.0.1.nip.io:8765", false},
		{"127.0.0.1:8765", "", false},
		{"127.0.0.1:8765", "[::1", false},
		{"gpu1:8765", "gpu1:8765", true},
		{"gpu1:8765", "GPU1", true},
		{"gpu1:8765", "gpu2:8765", false},
		{"0.0.0.0:8765", strings.ToUpper(machine) + ":8765", machine != ""},
		{"0.0.0.0:8765", "attacker.example:8765", false},
	} {
		if got := guard.ForListen(c.listen).Allows(c.host); got != c.want {
			t.Errorf("--listen %s, Host %q: %v, want %v", c.listen, c.host, got, c.want)
		}
	}
}

// TestTokens: a new token is 32 hex digits and new each time; Same
// compares whole tokens; a cookie's name is its token's own.
func TestTokens(t *testing.T) {
	a, b := guard.NewToken(), guard.NewToken()
	if len(a) != 32 || strings.Trim(a, "0123456789abcdef") != "" || a == b {
		t.Errorf("tokens %q, %q: want 32 hex digits, each new", a, b)
	}
	if !guard.Same(a, a) || guard.Same(a, b) || guard.Same(a, a[:31]) || guard.Same("", a) {
		t.Error("Same does not compare whole tokens")
	}
	if guard.CookieName("c", a) == guard.CookieName("c", b) || strings.Contains(guard.CookieName("c", a), a) {
		t.Error("two tokens share a cookie name, or the name shows its token")
	}
}
