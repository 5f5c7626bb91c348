package main

import (
	"flag"
	"io"
	"testing"

	"kvroute/internal/docref"
	"kvroute/sweep"
)

var update = flag.Bool("update", false, "rewrite docs/reference/simulate.md")

// TestReference checks docs/reference/simulate.md against the flags and the sweep file's
// keys, and that every one has a description; -update rewrites the page.
func TestReference(t *testing.T) {
	src, err := docref.NewSources(".")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := docref.Keys(sweep.File{}, src)
	if err != nil {
		t.Fatal(err)
	}
	_, fs := newFlags(io.Discard)
	fs.Lookup("parallel").DefValue = "GOMAXPROCS" // the machine's, not the page's
	cfs, _, _ := compareFlags(io.Discard)
	page := docref.Page{Path: "../../docs/reference/simulate.md", Title: "cmd/simulate reference",
		Regen: "go test ./cmd/simulate -run TestReference -update", Tables: []docref.Table{
			{Title: "Flags", Rows: docref.Flags(fs)},
			{Title: "Comparison flags (`simulate -compare` or `simulate compare`)", Intro: "Scores a simulated " +
				"run against a live one ([live.md](../live.md)).", Rows: docref.Flags(cfs)},
			{Title: "Sweep file (`-config`)", Intro: "YAML, decoded strictly ([sweeps.md](../sweeps.md)); `cmd/loadgen` " +
				"reads the same file. Any list of scalars under `fleet`, `workload`, `arrival` or `router` " +
				"(and `requests`, `duration`, `seed`) is a sweep axis. A sweep file has no defaults of its " +
				"own: a zero value means the default the description names.", Rows: keys},
		}}
	if err := page.Verify(*update); err != nil {
		t.Error(err)
	}
}
