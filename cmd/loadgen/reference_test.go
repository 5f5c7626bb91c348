package main

import (
	"flag"
	"io"
	"testing"

	"kvroute/internal/docref"
)

var update = flag.Bool("update", false, "rewrite docs/reference/loadgen.md")

// TestReference checks docs/reference/loadgen.md against the flags, and that every one has
// a description; -update rewrites the page.
func TestReference(t *testing.T) {
	_, fs := newFlags(io.Discard)
	page := docref.Page{Path: "../../docs/reference/loadgen.md", Title: "cmd/loadgen reference",
		Regen: "go test ./cmd/loadgen -run TestReference -update", Tables: []docref.Table{
			{Title: "Flags", Intro: "`-config` is a sweep file, the keys of [simulate.md](simulate.md#sweep-file--config): " +
				"`workload`, `arrival`, `requests`, `duration` and `seed` drive the load; `fleet`, `router` " +
				"and `failures` are recorded only.", Rows: docref.Flags(fs)},
		}}
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}
