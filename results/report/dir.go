package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"kvroute/results"
)

// WriteDir writes a results directory for runs: summary.json, series.json, summary.csv,
// report.md, report.html (the same, self-contained), the PNG figures under PlotDir (the
// first also as HeadlinePlotFile), and config.yaml holding cfgYAML (skipped when cfgYAML
// is nil). requests.csv is streamed separately (NewRequestsCSV). Run names must be
// present and unique. The same runs and configuration give byte-identical files; files from
// an earlier write that this one does not produce are left in place.
func WriteDir(dir string, runs []results.Run, cfgYAML []byte) error {
	if err := results.ValidateRuns(runs); err != nil {
		return err
	}
	plan := planRuns(runs)
	figs, err := buildFigures(plan)
	if err != nil {
		return err
	}
	report, err := buildReport(runs, plan, figs)
	if err != nil {
		return err
	}
	page, err := buildHTML(report, figs)
	if err != nil {
		return err
	}
	files := []dirFile{
		{results.SummaryJSONFile, func(w io.Writer) error { return WriteSummaryJSON(w, runs) }},
		{results.SeriesFile, func(w io.Writer) error { return results.WriteSeriesJSON(w, runs) }},
		{results.SummaryCSVFile, func(w io.Writer) error { return WriteSummaryCSV(w, runs) }},
		{results.ReportFile, func(w io.Writer) error { _, err := w.Write(report); return err }},
		{HTMLReportFile, func(w io.Writer) error { _, err := w.Write(page); return err }},
	}
	if cfgYAML != nil {
		files = append(files, dirFile{results.ConfigFile, func(w io.Writer) error { _, err := w.Write(cfgYAML); return err }})
	}
	for _, f := range files {
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			return err
		}
		if err := writeFile(dir, f.name, buf.Bytes()); err != nil {
			return err
		}
	}
	if len(figs) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, PlotDir), 0o755); err != nil {
			return fmt.Errorf("results: %w", err)
		}
	}
	for _, f := range figs {
		if err := writeFile(dir, f.path, f.png); err != nil {
			return err
		}
	}
	if len(figs) > 0 { // the headline figure beside summary.json, where scripts look for one
		if err := writeFile(dir, results.HeadlinePlotFile, figs[0].png); err != nil {
			return err
		}
	}
	return nil
}

// dirFile is one file of a results directory and how to produce it.
type dirFile struct {
	name  string
	write func(io.Writer) error
}

func writeFile(dir, name string, b []byte) error {
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), b, 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}
