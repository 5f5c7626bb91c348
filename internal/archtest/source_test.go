package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// wallClock lists the time functions that read or wait on the wall clock.
var wallClock = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "Tick": true,
	"After": true, "AfterFunc": true, "NewTimer": true, "NewTicker": true,
}

// randAllowed lists what a deterministic package may use from math/rand/v2: constructors and
// types, never the global source.
var randAllowed = map[string]bool{
	"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
	"Rand": true, "Source": true, "PCG": true, "ChaCha8": true, "Zipf": true,
}

// deterministic lists the directories whose non-test code must be deterministic.
var deterministic = []string{"router", "sim", "gpumodel", "workloads", "internal/table", "internal/tune"}

func TestNoWallClockOrGlobalRand(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range deterministic {
		base := filepath.Join(root, dir)
		if _, err := os.Stat(base); err != nil {
			continue // not written yet
		}
		err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			checkFile(t, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func checkFile(t *testing.T, path string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(p)
		if p == "math/rand/v2" {
			name = "rand"
		}
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		switch names[x.Name] {
		case "time":
			if wallClock[sel.Sel.Name] {
				t.Errorf("%s: time.%s reads the wall clock; take time as an argument", fset.Position(sel.Pos()), sel.Sel.Name)
			}
		case "math/rand/v2":
			if !randAllowed[sel.Sel.Name] {
				t.Errorf("%s: rand.%s uses the global source; take a seeded *rand.Rand", fset.Position(sel.Pos()), sel.Sel.Name)
			}
		}
		return true
	})
}
