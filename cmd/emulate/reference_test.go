package main

import (
	"flag"
	"io"
	"testing"

	"kvroute/internal/docref"
)

var update = flag.Bool("update", false, "rewrite docs/reference/emulate.md")

// TestReference checks docs/reference/emulate.md against the flags, and that every one has
// a description; -update rewrites the page.
func TestReference(t *testing.T) {
	_, fs := newFlags(io.Discard)
	page := docref.Page{Path: "../../docs/reference/emulate.md", Title: "cmd/emulate reference",
		Regen: "go test ./cmd/emulate -run TestReference -update", Tables: []docref.Table{
			{Title: "Flags", Intro: "`-fleet FILE` reads a sweep file's `fleet` section and `catalog`, the " +
				"`fleet.*` keys of [simulate.md](simulate.md#sweep-file--config); the fleet flags given explicitly override it.",
				Rows: docref.Flags(fs)},
		}}
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}
