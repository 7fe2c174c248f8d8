package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestImportGraph checks the layout README's "How it works" describes:
// store (and the leaf packages beside it under store/: prom, terminal)
// imports nothing of ours outside store/; ingest imports no package of
// query's; query, shell and the simulator never depend on package ingest;
// ingest/gen/servermetrics (reading a server's /metrics) imports nothing
// of ours but store; only store imports bbolt and only shell imports
// liner.
func TestImportGraph(t *testing.T) {
	t.Parallel()
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
			case under(p.ImportPath, "gendex/ingest/gen/servermetrics") && ours(imp) && !under(imp, "gendex/store") && !under(imp, "gendex/ingest/gen/servermetrics"):
				t.Errorf("%s imports %s; reading a server's /metrics needs nothing of ours but store", p.ImportPath, imp)
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

// Sizes of the house (README's How it works): no production file over
// maxFileLines lines and no production function over maxFuncLines, unless
// the function's doc comment says why it must be one piece (the words
// "must be one piece" and a reason). Testdata is not counted.
const (
	maxFileLines = 600
	maxFuncLines = 120
)

// maxMethods is the most methods one type of production code carries: a
// type that does more is several parts (gen's run was 140 methods before it
// became the feeder, the asker, the writer... each with one job).
const maxMethods = 40

// Sizes of the tests (every _test.go file of every package): no test file
// over maxTestFileLines lines and no function in one over maxTestFuncLines,
// so a test reads as one idea, split by what it checks (subtests or helpers
// whose names say what they assert), and a file holds one command's or one
// guarantee's tests.
const (
	maxTestFileLines = 800
	maxTestFuncLines = 150
)

// TestHouseSizes holds those sizes, and maxMethods, over every package of
// the module.
func TestHouseSizes(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, testFiles := 0, 0
	methods := map[string]int{} // "dir.Type" -> its methods
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			testFiles++
			checkTestSizes(t, fset, path, f)
			return nil
		}
		files++
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s is %d lines (at most %d): split it by idea", path, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fd.Recv != nil {
				methods[filepath.Dir(path)+": "+strings.Split(funcName(fd), ".")[0]]++
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > maxFuncLines && !strings.Contains(fd.Doc.Text(), "must be one piece") {
				t.Errorf("%s: %s is %d lines (at most %d, unless its doc comment says why it must be one piece)",
					path, funcName(fd), n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for typ, n := range methods {
		if n > maxMethods {
			t.Errorf("%s has %d methods (at most %d): split it into parts with one job each", typ, n, maxMethods)
		}
	}
	if files < 50 || testFiles < 50 {
		t.Fatalf("found %d production files and %d test files; the walk went wrong", files, testFiles)
	}
}

// checkTestSizes holds the test file at path within maxTestFileLines and
// each of its functions within maxTestFuncLines.
func checkTestSizes(t *testing.T, fset *token.FileSet, path string, f *ast.File) {
	t.Helper()
	if n := fset.File(f.Pos()).LineCount(); n > maxTestFileLines {
		t.Errorf("%s is %d lines (at most %d for a test file): split it by command or guarantee", path, n, maxTestFileLines)
	}
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxTestFuncLines {
			t.Errorf("%s: %s is %d lines (at most %d for a test function): split it by what it checks",
				path, funcName(fd), n, maxTestFuncLines)
		}
	}
}

// funcName is fd's name as a reader finds it: Type.Method or func.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if g, ok := typ.(*ast.IndexExpr); ok { // a generic type's method
		typ = g.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
