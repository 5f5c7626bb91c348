package gpumodel

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
)

var update = flag.Bool("update", false, "rewrite the calibration table in README.md")

// The acceptance bar for the step-time and capacity model (see README.md).
const (
	maxPointError = 0.25 // every point within ±25%
	maxMeanError  = 0.12 // mean absolute error at most 12%
)

type calibrationPoint struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"` // step | layer_linear | kv_capacity | workload | offload
	GPU   string `json:"gpu"`
	Model string `json:"model"`
	TP    int    `json:"tp"`
	// DisableCustomAllReduce prices the point's all-reduces as NCCL's (a measurement from
	// before vLLM had its custom all-reduce, or with --disable-custom-all-reduce).
	DisableCustomAllReduce bool    `json:"disable_custom_all_reduce"`
	Prefill                []Chunk `json:"prefill"`
	Decode                 struct {
		Seqs    int `json:"seqs"`
		Context int `json:"context"`
	} `json:"decode"`
	Tokens int `json:"tokens"`
	// Metric and Setup are a workload point's; internal/calibrate runs those.
	Metric   string          `json:"metric"`
	Setup    json.RawMessage `json:"setup"`
	Exempt   string          `json:"exempt"`
	Measured float64         `json:"measured"`
	Unit     string          `json:"unit"` // ms | tokens
	Source   string          `json:"source"`
	Note     string          `json:"note"`
}

func loadCalibration(t *testing.T) []calibrationPoint {
	t.Helper()
	f, err := os.Open("testdata/calibration.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc struct {
		Description string             `json:"description"`
		Points      []calibrationPoint `json:"points"`
	}
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("testdata/calibration.json: %v", err)
	}
	// Workload and offload points are simulated runs; internal/calibrate checks them
	// (gpumodel cannot import the simulator).
	var steps []calibrationPoint
	for _, p := range doc.Points {
		if p.Kind != "workload" && p.Kind != "offload" {
			steps = append(steps, p)
		}
	}
	return steps
}

// predict prices one calibration point in its unit.
func predict(p calibrationPoint) (float64, error) { return price(p, true) }

// price prices one calibration point in its unit, a step with or without its
// tensor-parallel all-reduces.
func price(p calibrationPoint, allReduce bool) (float64, error) {
	g, err := LookupGPU(p.GPU)
	if err != nil {
		return 0, err
	}
	m, err := LookupModel(p.Model)
	if err != nil {
		return 0, err
	}
	d := DefaultDeployment(g, m, p.TP)
	d.DisableCustomAllReduce = p.DisableCustomAllReduce
	pr, err := NewPricer(d)
	if err != nil {
		return 0, err
	}
	switch p.Kind {
	case "step":
		var s Step
		for _, c := range p.Prefill {
			s.AddPrefill(c.Tokens, c.Context)
		}
		for range p.Decode.Seqs {
			s.AddDecode(p.Decode.Context)
		}
		b := pr.Breakdown(s)
		if !allReduce {
			b.Total -= b.Comm
		}
		return b.Total.Seconds() * 1e3, nil
	case "layer_linear":
		return pr.layerLinearSeconds(p.Tokens) * 1e3, nil
	case "kv_capacity":
		return float64(d.KVCapacityTokens()), nil
	}
	return 0, fmt.Errorf("unknown kind %q", p.Kind)
}

// calibrationTable prices every point with priceOf and renders the predicted-vs-measured
// table.
func calibrationTable(t *testing.T, pts []calibrationPoint, priceOf func(calibrationPoint) (float64, error)) (table string, errs []float64) {
	t.Helper()
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "point\tunit\tmeasured\tpredicted\terror\t")
	var sum float64
	for _, p := range pts {
		got, err := priceOf(p)
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		e := got/p.Measured - 1
		errs = append(errs, e)
		sum += math.Abs(e)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%+.1f%%\t\n", p.Name, p.Unit, format(p.Measured), format(got), 100*e)
	}
	fmt.Fprintf(w, "mean absolute error\t\t\t\t%.1f%%\t\n", 100*sum/float64(len(pts)))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String(), errs
}

func format(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// TestCalibration prices each published measurement in testdata/calibration.json,
// logs predicted against measured, and fails when a point misses by more than
// maxPointError or the mean absolute error exceeds maxMeanError.
func TestCalibration(t *testing.T) {
	pts := loadCalibration(t)
	if len(pts) < 13 {
		t.Fatalf("calibration table has %d points, want at least the 13 the spec lists", len(pts))
	}
	table, errs := calibrationTable(t, pts, predict)
	t.Log("\n" + table)
	var sum float64
	for i, e := range errs {
		sum += math.Abs(e)
		if math.Abs(e) > maxPointError {
			t.Errorf("%s: predicted is %+.1f%% off the measured %v %s (tolerance ±%.0f%%); source: %s",
				pts[i].Name, 100*e, pts[i].Measured, pts[i].Unit, 100*maxPointError, pts[i].Source)
		}
	}
	if mae := sum / float64(len(errs)); mae > maxMeanError {
		t.Errorf("mean absolute error %.1f%% exceeds %.0f%%", 100*mae, 100*maxMeanError)
	}
	checkReadme(t, "calibration", "TestCalibration", table)
}

// checkReadme fails when README.md's table called name, which test generates, is stale;
// -update rewrites it.
func checkReadme(t *testing.T, name, test, table string) {
	t.Helper()
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	begin := fmt.Sprintf("<!-- %s table: generated by go test -run %s -update -->\n```\n", name, test)
	end := fmt.Sprintf("```\n<!-- end %s table -->", name)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the %s table markers %q ... %q", name, begin, end)
	}
	want := readme[:i] + begin + table + readme[j:]
	if want == readme {
		return
	}
	if !*update {
		t.Errorf("README.md %s table is stale; run go test ./gpumodel -run %s -update", name, test)
		return
	}
	if err := os.WriteFile("README.md", []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
}
