//go:build !linux

package store

// networkFS cannot tell a network filesystem on this system.
func networkFS(path string) string { return "" }
