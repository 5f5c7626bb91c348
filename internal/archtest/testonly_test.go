package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// isHelper reports whether a package is a test helper: its name ends in "test", as
// net/http/httptest and testing/fstest do.
func isHelper(name string) bool { return strings.HasSuffix(name, "test") }

// TestHelpersAreTestOnly holds the line between test helpers and the code that ships: only a
// test-helper package may import "testing" from its non-test files, and a helper is imported
// only by tests and by other helpers, so no binary links the testing package or a harness
// such as internal/benchtest's nginx starter.
func TestHelpersAreTestOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	names := map[string]string{} // import path -> package name
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		names[f[0]], imports[f[0]] = f[1], f[2:]
	}
	for path, imps := range imports {
		if isHelper(names[path]) {
			continue
		}
		for _, imp := range imps {
			switch {
			case imp == "testing":
				t.Errorf("%s imports testing outside its tests: move the code to a _test.go file or a package named *test", path)
			case isHelper(names[imp]):
				t.Errorf("%s imports the test helper %s outside its tests", path, imp)
			}
		}
	}
}

func TestIsHelper(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{{"routertest", true}, {"benchtest", true}, {"nettest", true}, {"archtest", true}, {"router", false}, {"main", false}, {"testing", false}} {
		if got := isHelper(tc.name); got != tc.want {
			t.Errorf("isHelper(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
