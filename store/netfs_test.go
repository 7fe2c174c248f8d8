//go:build linux

package store

import (
	"path/filepath"
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
