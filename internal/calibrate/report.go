package calibrate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"kvroute/gpumodel"
)

// catalogGPU is a catalog file's GPU entry as gpumodel.LoadCatalog reads it: a name, the
// entry it starts from, and the fitted efficiencies.
type catalogGPU struct {
	Name       string            `json:"name"`
	Base       string            `json:"base"`
	Efficiency catalogEfficiency `json:"efficiency"`
}

type catalogEfficiency struct {
	PrefillMFU float64 `json:"prefill_mfu"`
	DecodeMFU  float64 `json:"decode_mfu"`
	Memory     float64 `json:"memory"`
	Link       float64 `json:"link"`
}

// WriteCatalog writes a catalog file (gpumodel.LoadCatalog's format) with one GPU named name
// that starts from the catalog GPU base and carries the efficiencies e, rounded to 4 digits.
func WriteCatalog(w io.Writer, name, base string, e gpumodel.Efficiency) error {
	r := func(v float64) float64 { return math.Round(v*1e4) / 1e4 }
	doc := struct {
		GPUs []catalogGPU `json:"gpus"`
	}{[]catalogGPU{{Name: name, Base: base, Efficiency: catalogEfficiency{
		PrefillMFU: r(e.PrefillMFU), DecodeMFU: r(e.DecodeMFU), Memory: r(e.Memory), Link: r(e.Link)}}}}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("calibrate: catalog: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("calibrate: catalog: %w", err)
	}
	return nil
}

// ReportInfo describes a calibration for its report.
type ReportInfo struct {
	// Inputs and Holdout name the files read; GPU and Model the replica; Catalog the written
	// catalog file and CatalogGPU its entry.
	Inputs, Holdout     []string
	GPU, Model          string
	Catalog, CatalogGPU string
	HoldoutEvery, TP    int
}

// metricRows are the report's rows: a label and how to read it from Stats.
var metricRows = []struct {
	label string
	get   func(Stats) float64
}{
	{"TTFT mean (ms)", func(s Stats) float64 { return s.TTFTMean }},
	{"TTFT p50 (ms)", func(s Stats) float64 { return s.TTFTp50 }},
	{"TTFT p99 (ms)", func(s Stats) float64 { return s.TTFTp99 }},
	{"TPOT mean (ms)", func(s Stats) float64 { return s.TPOTMean }},
	{"TPOT p50 (ms)", func(s Stats) float64 { return s.TPOTp50 }},
	{"TPOT p99 (ms)", func(s Stats) float64 { return s.TPOTp99 }},
	{"ITL mean (ms)", func(s Stats) float64 { return s.ITLMean }},
	{"ITL p99 (ms)", func(s Stats) float64 { return s.ITLp99 }},
	{"E2E mean (ms)", func(s Stats) float64 { return s.E2EMean }},
	{"E2E p99 (ms)", func(s Stats) float64 { return s.E2Ep99 }},
}

// WriteReport writes the calibration's markdown report: the parameters before and after,
// and per set and metric the measured value, the simulated ones and their relative errors.
func WriteReport(w io.Writer, info ReportInfo, r FitResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Calibration of %s / %s (TP %d)\n\n", info.GPU, info.Model, max(info.TP, 1))
	fmt.Fprintf(&b, "Fitted to: %s.  \n", strings.Join(info.Inputs, ", "))
	if len(info.Holdout) > 0 {
		fmt.Fprintf(&b, "Held out: %s.  \n", strings.Join(info.Holdout, ", "))
	} else {
		fmt.Fprintf(&b, "Held out: 1 request in %d of each input (replayed with the rest, not fitted).  \n", info.HoldoutEvery)
	}
	fmt.Fprintf(&b, "Catalog: `%s`, GPU `%s`. Search: Nelder–Mead, %d simulations, final loss %.3g.  \n",
		info.Catalog, info.CatalogGPU, r.Evaluations, r.Loss)
	if r.ServerSide {
		b.WriteString("Objective: the servers' own means (vLLM histograms: TTFT, TPOT, E2E); network delay 0 (no HTTP hop in them), not fitted.\n\n")
	} else {
		b.WriteString("Objective: the client's request latencies (TTFT and TPOT mean and p50, E2E mean).\n\n")
	}
	b.WriteString("| parameter | before | after |\n|---|---:|---:|\n")
	for _, p := range params(max(info.TP, 1), true) {
		fmt.Fprintf(&b, "| %s | %.4f | %.4f |\n", p.name, p.get(r.Before), p.get(r.After))
	}
	for _, s := range r.Sets {
		fmt.Fprintf(&b, "\n## %s requests (%d)\n\n", s.Set, s.Measured.Requests)
		b.WriteString("| metric | measured | before | error | after | error |\n|---|---:|---:|---:|---:|---:|\n")
		for _, row := range metricRows {
			m := row.get(s.Measured)
			if m == 0 {
				continue
			}
			bv, av := row.get(s.Before), row.get(s.After)
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %.2f | %s |\n", row.label, m, bv, relErr(bv, m), av, relErr(av, m))
		}
		if s.Server != nil {
			writeServerRows(&b, *s.Server)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RelativeError returns (sim − measured) / measured.
func RelativeError(sim, measured float64) float64 { return (sim - measured) / measured }

func relErr(sim, measured float64) string {
	return fmt.Sprintf("%+.1f%%", 100*RelativeError(sim, measured))
}

// serverRows are the server-side report rows: a label, how to read the mean, and whether the
// simulator has a counterpart.
var serverRows = []struct {
	label string
	get   func(ServerStats) Moment
	sim   bool
}{
	{"TTFT mean (ms)", func(s ServerStats) Moment { return s.TTFT }, true},
	{"TPOT mean (ms)", func(s ServerStats) Moment { return s.TPOT }, true},
	{"E2E mean (ms)", func(s ServerStats) Moment { return s.E2E }, true},
	{"decode mean (ms)", func(s ServerStats) Moment { return s.Decode }, true},
	{"prefill mean (ms)", func(s ServerStats) Moment { return s.Prefill }, false},
	{"queue mean (ms)", func(s ServerStats) Moment { return s.Queue }, false},
}

// writeServerRows writes a set's server-side table; a quantity the simulator has no
// counterpart for shows the measured value only.
func writeServerRows(b *strings.Builder, c ServerComparison) {
	b.WriteString("\nServer-side (vLLM histograms, whole runs):\n\n")
	b.WriteString("| metric | measured | before | error | after | error |\n|---|---:|---:|---:|---:|---:|\n")
	for _, row := range serverRows {
		m := row.get(c.Measured).MeanMS()
		if m == 0 {
			continue
		}
		if !row.sim {
			fmt.Fprintf(b, "| %s | %.2f | — | | — | |\n", row.label, m)
			continue
		}
		bv, av := row.get(c.Before).MeanMS(), row.get(c.After).MeanMS()
		fmt.Fprintf(b, "| %s | %.2f | %.2f | %s | %.2f | %s |\n", row.label, m, bv, relErr(bv, m), av, relErr(av, m))
	}
}
