package live_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/live"
)

// TestSocketServedByAnotherUserRefused: a socket of ours, in a folder of
// ours, served by a process of another user (it took our bound socket and
// listens on it) is refused at connect: the reader asks the process at
// the other end who it is (SO_PEERCRED), and sends it nothing.
func TestSocketServedByAnotherUserRefused(t *testing.T) {
	if os.Getenv("GENDEX_TEST_PEER") == "serve" {
		servePeer(t)
		return
	}
	// Only root may start a process as another user (setuid), and the
	// guarantee is about another user's process: a fake one of our own uid
	// would be accepted, rightly. CI runs as root (.ci/run installs its
	// packages with apt-get), so the test runs there on every push.
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can run the peer process as another user (uid 4242); CI runs it as root")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "g.db.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	bound := os.NewFile(uintptr(fd), "bound socket")
	defer bound.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}

	// The other user's process: this test binary, copied where uid 4242
	// may run it, listening on the socket it is given.
	binDir, err := os.MkdirTemp("", "gendex-peer")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	os.Chmod(binDir, 0o755)
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "peer.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	// 0755 whatever the umask, which WriteFile's mode is subject to. (It
	// is exec'd just after being written: no test of this package runs in
	// parallel and forks meanwhile, keeping it open for writing: ETXTBSY.)
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	peer := exec.Command(bin, "-test.run=^TestSocketServedByAnotherUserRefused$")
	peer.Env = append(os.Environ(), "GENDEX_TEST_PEER=serve")
	peer.ExtraFiles = []*os.File{bound} // fd 3
	peer.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4242}}
	stdin, err := peer.StdinPipe() // closed: the peer ends
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := peer.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var peerErr strings.Builder
	peer.Stderr = &peerErr
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); peer.Wait() }()
	// The peer says "listening" once it listens, and "got a question" for
	// each connection that sent it something.
	said := make(chan string, 16)
	go func() {
		var b [256]byte
		for {
			n, err := stdout.Read(b[:])
			if n > 0 {
				said <- string(b[:n])
			}
			if err != nil {
				close(said)
				return
			}
		}
	}()
	select {
	case s := <-said:
		if !strings.Contains(s, "listening") {
			t.Fatalf("the peer said %q\n%s", s, peerErr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the peer never listened\n%s", peerErr.String())
	}

	r := live.NewRemote(sock)
	defer r.Close()
	q, _ := query.Parse([]string{"progress"})
	var c query.Collect
	err = r.Ask(t.Context(), q, time.Now(), &c)
	if !errors.Is(err, live.ErrUnsafeSocket) || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("Ask through a socket another user serves: %v; want ErrUnsafeSocket naming uid 4242", err)
	}
	stdin.Close()
	for s := range said {
		if strings.Contains(s, "got") {
			t.Errorf("the other user's process was sent the question: %q", s)
		}
	}
}

// servePeer is the other user's process: it listens on the bound socket
// at fd 3 and reports what each connection sends, until stdin closes.
func servePeer(t *testing.T) {
	if err := syscall.Listen(3, 8); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("listening\n")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		nfd, _, err := syscall.Accept(3)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c := os.NewFile(uintptr(nfd), "conn")
			defer c.Close()
			if n, _ := c.Read(make([]byte, 4096)); n > 0 {
				os.Stdout.WriteString("got a question\n")
			}
		}()
	}
}
