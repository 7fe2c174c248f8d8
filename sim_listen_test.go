package main

import (
	"net"
	"strings"
	"testing"
)

// TestSimBindsBeforeItSaysSo: on a port another server holds, gendex sim
// says so and exits 1, and never prints the banner a script waits for
// (a cluster task would then talk to whatever holds the port).
func TestSimBindsBeforeItSaysSo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := gendex(t, testEnv(nil), "sim", "--listen", ln.Addr().String())
	if r.code != 1 || strings.Contains(r.stderr, "simulator on") || !strings.Contains(r.stderr, "address already in use") {
		t.Errorf("gendex sim on a taken port: exit %d\n%s\nwant exit 1, no banner, the port said to be in use", r.code, r.stderr)
	}
}
