package ingest

import (
	"os"
	"path/filepath"
	"strings"

	"gendex/store"
)

// similarPath is " (did you mean P?)" for the entry of path's folder
// nearest its name, or "" when none is near.
func similarPath(path string) string {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if c := store.Closest(base, names); c != "" {
		return " (did you mean " + filepath.Join(filepath.Dir(path), c) + "?)"
	}
	return ""
}

// RootBelow returns the folder just below path whose dataset folders
// hold prompts (path is the parent of the datasets' root), or "".
func RootBelow(path string) string {
	entries, err := os.ReadDir(path)
	if err != nil {
		return ""
	}
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		below := filepath.Join(path, e.Name())
		srcs, err := discover(below, "", nil)
		if err != nil {
			continue
		}
		for _, s := range srcs {
			if s.Stage == store.Prompts {
				return below
			}
		}
	}
	return ""
}
