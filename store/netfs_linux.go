package store

import (
	"os"
	"path/filepath"
	"syscall"
)

// networkFS names the network filesystem path lies on, or "" when it is
// local (or cannot be told). bbolt's lock (flock) and its memory map are
// not reliable across machines on these: two writers on two nodes could
// both take the lock and corrupt the index.
func networkFS(path string) string {
	dir := filepath.Dir(path)
	var st syscall.Statfs_t
	for {
		if err := syscall.Statfs(dir, &st); err == nil {
			break
		} else if !os.IsNotExist(err) {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent // not created yet: ask of the folder it goes in
	}
	return fsName(int64(st.Type))
}

// fsName names the network filesystems among statfs magic numbers
// (linux/magic.h and the filesystems' own headers).
func fsName(magic int64) string {
	switch uint32(magic) {
	case 0x6969:
		return "NFS"
	case 0x517B:
		return "SMB"
	case 0xFF534D42:
		return "CIFS"
	case 0xFE534D42:
		return "SMB2"
	case 0x0BD00BD0:
		return "Lustre"
	case 0x47504653:
		return "GPFS"
	case 0x00C36400:
		return "CephFS"
	case 0x5346414F:
		return "AFS"
	case 0x01021997:
		return "9P"
	case 0x65735546:
		return "FUSE (a mounted bucket, sshfs, ...)"
	}
	return ""
}
