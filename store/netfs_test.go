//go:build linux

package store

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNetworkFS: the statfs magic numbers of network filesystems are
// named, local ones are not, and a local temp folder is local.
func TestNetworkFS(t *testing.T) {
	for magic, want := range map[int64]string{0x6969: "NFS", 0xFF534D42: "CIFS", 0x0BD00BD0: "Lustre", 0x65735546: "FUSE (a mounted bucket, sshfs, ...)",
		0xEF53: "", 0x01021994: "", 0x58465342: "", 0x9123683E: ""} { // ext4, tmpfs, xfs, btrfs
		if got := fsName(magic); got != want {
			t.Errorf("fsName(%#x) = %q, want %q", magic, got, want)
		}
	}
	if fs := networkFS(filepath.Join(t.TempDir(), "not", "yet", "g.db")); fs != "" {
		t.Errorf("the test's temp folder is on %s", fs)
	}
}

// TestNetworkRefusalSaysWhere: the refusal of an index on a network
// filesystem (a login node's ~/run.db) names a local path for this
// user's index, and a reader's command, never an array task's path.
func TestNetworkRefusalSaysWhere(t *testing.T) {
	t.Setenv("USER", "ana")
	msg := networkRefusal("/home/ana/run.db", "NFS").Error()
	for _, want := range []string{"--db /tmp/ana-run.db", "gendex --db /tmp/ana-run.db ingest --follow FOLDER", "GENDEX_NETWORK_DB=1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "SLURM_ARRAY_TASK_ID") {
		t.Errorf("refusal %q suggests an array task's path to a reader", msg)
	}
}
