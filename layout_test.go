package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph checks the layout README's "How it works" describes:
// store (and the leaf packages beside it under store/: prom, terminal)
// imports nothing of ours outside store/; ingest imports no package of
// query's; query, shell and the simulator never depend on package ingest;
// only store imports bbolt and only shell imports liner.
func TestImportGraph(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath    string
		Imports, Deps []string
	}
	var pkgs []pkg
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	ours := func(path string) bool { return path == "gendex" || strings.HasPrefix(path, "gendex/") }
	under := func(path, root string) bool { return path == root || strings.HasPrefix(path, root+"/") }
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			switch {
			case p.ImportPath == "gendex/store" && ours(imp):
				t.Errorf("store imports %s; it must import nothing of ours", imp)
			case under(p.ImportPath, "gendex/store") && ours(imp) && !under(imp, "gendex/store"):
				t.Errorf("%s imports %s; what is under store/ imports nothing of ours outside it", p.ImportPath, imp)
			case under(p.ImportPath, "gendex/ingest") && under(imp, "gendex/query"):
				t.Errorf("%s imports %s; ingest must import no package of query's (shared code lives under store/)", p.ImportPath, imp)
			case strings.HasPrefix(imp, "go.etcd.io/bbolt") && p.ImportPath != "gendex/store":
				t.Errorf("%s imports bbolt; only store may", p.ImportPath)
			case strings.HasPrefix(imp, "github.com/peterh/liner") && p.ImportPath != "gendex/shell":
				t.Errorf("%s imports liner; only shell may", p.ImportPath)
			}
		}
		for _, root := range []string{"gendex/query", "gendex/shell", "gendex/ingest/gen/sim"} {
			if under(p.ImportPath, root) && slices.Contains(p.Deps, "gendex/ingest") {
				t.Errorf("%s depends on gendex/ingest; query, shell and the simulator must not", p.ImportPath)
			}
		}
	}
}
