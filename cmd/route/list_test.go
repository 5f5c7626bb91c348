package main

import (
	"bytes"
	"strings"
	"testing"

	"kvroute/router"
)

// -list-policies prints one line per policy: its name, the upstream source it reproduces and
// its rule, tab-separated.
func TestListPolicies(t *testing.T) {
	var out bytes.Buffer
	listPolicies(&out)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	names := router.Builtin().Names()
	if len(lines) != len(names) {
		t.Fatalf("%d lines for %d policies:\n%s", len(lines), len(names), out.String())
	}
	for i, line := range lines {
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[0] != names[i] || f[1] == "" || f[2] == "" {
			t.Errorf("line %d = %q: want name %q, source and rule", i, line, names[i])
		}
	}
	if !strings.Contains(out.String(), "prefix-cache\tAIBrix v0.7.0") {
		t.Errorf("prefix-cache does not name its upstream release:\n%s", out.String())
	}
}
