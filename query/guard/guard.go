// Package guard keeps gendex's HTTP listeners on TCP (the web view, the
// writer's --listen port) to their owner: a Host check that defeats DNS
// rebinding, and the tokens that keep out other users of the machine.
//
// Loopback is no user boundary: anyone logged in to the node can connect
// to 127.0.0.1, and a page in the owner's browser can rebind a name of its
// own to 127.0.0.1 and read what a listener answers there. The Host check
// stops the second (a rebound page sends its own name as Host); the token
// stops both. And no one may use up a listening process's files: each
// listener holds a few connections at a time, each for a bounded time
// (bounds.go).
package guard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// Hosts says which Host headers a listener answers: its own addresses.
// Every Hosts answers localhost and any IP literal (a browser sends an IP
// as Host only to the server at that IP, so no name can be rebound); the
// zero Hosts answers nothing else, which is right for a loopback listener.
// The port is not compared: a tunnel (ssh -L 9000:127.0.0.1:8765) may
// reach the listener under another, and the port plays no part in
// rebinding, which needs a name.
type Hosts struct {
	names []string
}

// ForListen returns the Hosts of a listener started with --listen addr
// (HOST:PORT or :PORT): the loopback names, and HOST when it is a name;
// when HOST is a wildcard (0.0.0.0, ::), the machine's own name too.
func ForListen(addr string) Hosts {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	host = normal(host)
	var h Hosts
	ip, err := netip.ParseAddr(host)
	switch {
	case host == "":
	case err != nil:
		h.names = append(h.names, host)
	case ip.IsUnspecified():
		if name, err := os.Hostname(); err == nil && name != "" {
			name = normal(name)
			h.names = append(h.names, name)
			if short, _, ok := strings.Cut(name, "."); ok {
				h.names = append(h.names, short)
			}
		}
	}
	return h
}

// normal is a host name as compared: lower case, without brackets or a
// final dot.
func normal(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// Allows reports whether a request whose Host header is hostport is for
// this listener.
func (h Hosts) Allows(hostport string) bool {
	host := hostport
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return false
		}
		host = host[1:end]
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[:i], ":") {
		host = host[:i]
	}
	host = normal(host)
	if host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	for _, n := range h.names {
		if n == host {
			return true
		}
	}
	return false
}

// Check wraps next: a request for another Host gets 421 and nothing of
// the run.
func (h Hosts) Check(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.Allows(r.Host) {
			Refuse(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Refuse answers a request for another Host: 421, and a sentence saying
// which names are answered.
func Refuse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, fmt.Sprintf("421 misdirected request: Host %q is not this server's address; gendex answers only "+
		"requests for 127.0.0.1, localhost, [::1] or the name given to --listen (a proxy in front must send one of them as Host)",
		r.Host), http.StatusMisdirectedRequest)
}

// NewToken returns a random token of 128 bits, as 32 hex digits.
func NewToken() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand's contract since Go 1.24)
	return hex.EncodeToString(b)
}

// Same reports whether got is want, in a time that does not depend on
// where they differ or on got's length.
func Same(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// CookieName is the name of a cookie that carries token: its own per
// token, so two listeners on one machine (each with its own token) do
// not overwrite each other's cookie, which a browser keeps per host, not
// per port.
func CookieName(prefix, token string) string {
	sum := sha256.Sum256([]byte("gendex cookie " + token))
	return prefix + "_" + hex.EncodeToString(sum[:6])
}
