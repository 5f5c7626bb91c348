package main

import (
	"flag"
	"io"
	"testing"

	"kvroute/internal/docref"
)

var update = flag.Bool("update", false, "rewrite docs/reference/route.md")

// TestReference checks docs/reference/route.md against the flags and the configuration
// file's keys, and that every one has a description; -update rewrites the page.
func TestReference(t *testing.T) {
	src, err := docref.NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := docref.Keys(defaultFileConfig(), src)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	page := docref.Page{Path: "../../docs/reference/route.md", Title: "cmd/route reference",
		Regen: "go test ./cmd/route -run TestReference -update", Tables: []docref.Table{
			{Title: "Flags", Intro: "Flags given explicitly override the `-config` file.", Rows: docref.Flags(o.fs)},
			{Title: "Configuration file (`-config`)", Intro: "YAML, decoded strictly ([proxy.md](../proxy.md)). " +
				"`<name>` is a backend's name or URL. The policy's parameters: [policies.md](policies.md).", Rows: keys},
		}}
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}
