package calibrate

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
)

var update = flag.Bool("update", false, "rewrite the workload calibration table in docs/fidelity.md")

// The acceptance bar, as gpumodel's step-level calibration.
const (
	maxPointError = 0.25
	maxMeanError  = 0.12
	// maxLengthError bounds the drawn mean lengths' distance from the published means:
	// about 2.5 standard errors of a 1000-prompt sample of ShareGPT's heavy-tailed prompts.
	maxLengthError = 0.10
)

const calibrationFile = "../../gpumodel/testdata/calibration.json"

// calPoint is one published point of gpumodel/testdata/calibration.json whose setup is S.
type calPoint[S any] struct {
	Name     string  `json:"name"`
	Kind     string  `json:"kind"`
	Metric   string  `json:"metric"`
	Setup    S       `json:"setup"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Source   string  `json:"source"`
	Note     string  `json:"note"`
	Exempt   string  `json:"exempt"`
}

// point is a workload point.
type point = calPoint[Setup]

func loadPoints(t *testing.T) []point { return loadKind[Setup](t, "workload") }

// loadKind returns the points of the given kind, decoded with its setup type.
func loadKind[S any](t *testing.T, kind string) []calPoint[S] {
	t.Helper()
	raw, err := os.ReadFile(calibrationFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Points []json.RawMessage `json:"points"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", calibrationFile, err)
	}
	var pts []calPoint[S]
	for i, r := range doc.Points {
		var k struct{ Kind string }
		if err := json.Unmarshal(r, &k); err != nil {
			t.Fatalf("%s: point %d: %v", calibrationFile, i+1, err)
		}
		if k.Kind != kind {
			continue
		}
		var p calPoint[S]
		if err := json.Unmarshal(r, &p); err != nil {
			t.Fatalf("%s: point %d: %v", calibrationFile, i+1, err)
		}
		pts = append(pts, p)
	}
	return pts
}

// runAll simulates each distinct setup once (several points share a run).
func runAll(t *testing.T, pts []point) map[string]Result {
	t.Helper()
	runs := map[string]Result{}
	for _, p := range pts {
		key := fmt.Sprintf("%+v", p.Setup)
		if _, ok := runs[key]; ok {
			continue
		}
		r, err := Run(context.Background(), p.Setup, 1)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		runs[key] = r
	}
	return runs
}

// TestWorkloadCalibration simulates every published benchmark of kind workload in
// gpumodel/testdata/calibration.json and fails when a point not marked exempt misses by
// more than ±25%, when the mean absolute error over every point not marked exempt (throughput
// and median TPOT alike) exceeds 12%, or when the drawn lengths stray from the published
// means.
func TestWorkloadCalibration(t *testing.T) {
	pts := loadPoints(t)
	if len(pts) < 10 {
		t.Fatalf("%d workload points, want the 10+ of issue 17", len(pts))
	}
	runs := runAll(t, pts)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "point\tunit\tpublished\tsimulated\terror\t\t")
	var all, tput []float64
	for _, p := range pts {
		r := runs[fmt.Sprintf("%+v", p.Setup)]
		got, err := r.Metric(p.Metric)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		checkLengths(t, p, r)
		e := got/p.Measured - 1
		mark := ""
		switch {
		case p.Exempt != "":
			mark = "exempt"
		case math.Abs(e) > maxPointError:
			t.Errorf("%s: simulated %.4g %s is %+.1f%% off the published %.4g (tolerance ±%.0f%%); source: %s",
				p.Name, got, p.Unit, 100*e, p.Measured, 100*maxPointError, p.Source)
		}
		if p.Exempt == "" {
			all = append(all, math.Abs(e))
			if p.Metric == "req/s" || p.Metric == "out_tok/s" {
				tput = append(tput, math.Abs(e))
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%.2f\t%.2f\t%+.1f%%\t%s\t\n", p.Name, p.Unit, p.Measured, got, 100*e, mark)
	}
	fmt.Fprintf(w, "mean absolute error, throughput points\t\t\t\t%.1f%%\t\t\n", 100*mean(tput))
	fmt.Fprintf(w, "mean absolute error, all checked points\t\t\t\t%.1f%%\t\t\n", 100*mean(all))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if m := mean(all); m > maxMeanError {
		t.Errorf("mean absolute error over the %d checked points %.1f%% exceeds %.0f%%", len(all), 100*m, 100*maxMeanError)
	}
	checkDoc(t, b.String())
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(len(xs), 1))
}

// checkLengths fails when the simulated run's mean prompt or answer length is more than
// maxLengthError from the published mean it was drawn to match, or is not exactly the
// setup's length for a Random setup.
func checkLengths(t *testing.T, p point, r Result) {
	t.Helper()
	tolerance := maxLengthError
	if p.Setup.Random {
		tolerance = 0 // every request has exactly the setup's lengths
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{{"input", r.MeanInput, float64(p.Setup.InputTokens)}, {"output", r.MeanOutput, float64(p.Setup.OutputTokens)}} {
		if math.Abs(c.got/c.want-1) > tolerance {
			t.Errorf("%s: mean %s length %.1f tokens, want %.0f ±%.0f%%", p.Name, c.what, c.got, c.want, 100*tolerance)
		}
	}
}

const (
	docFile  = "../../docs/fidelity.md"
	docBegin = "<!-- workload calibration: generated by go test ./internal/calibrate -update -->\n```\n"
	docEnd   = "```\n<!-- end workload calibration -->"
)

// checkDoc fails when docs/fidelity.md's workload table is stale; -update rewrites it.
func checkDoc(t *testing.T, table string) {
	t.Helper()
	checkDocSection(t, docBegin, docEnd, table)
}

// checkDocSection fails when the table between begin and end in docs/fidelity.md is stale;
// -update rewrites it.
func checkDocSection(t *testing.T, docBegin, docEnd, table string) {
	t.Helper()
	raw, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q ... %q", docFile, docBegin, docEnd)
	}
	want := doc[:i] + docBegin + table + doc[j:]
	if want == doc {
		return
	}
	if !*update {
		t.Errorf("%s table %q is stale; run go test ./internal/calibrate -update", docFile, strings.TrimSpace(docBegin))
		return
	}
	if err := os.WriteFile(docFile, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
}
