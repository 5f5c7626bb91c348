package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The files of a results directory.
const (
	SummaryJSONFile = "summary.json" // the runs and their metrics (DESIGN.md's schema)
	SeriesFile      = "series.json"  // each run's plot data, one run per line
	SummaryCSVFile  = "summary.csv"  // one row per run
	RequestsFile    = "requests.csv" // one row per request, streamed by the caller (RequestsCSV)
	ConfigFile      = "config.yaml"  // the resolved configuration, as the caller gives it
	ReportFile      = "report.md"    // tables, verdict and plots
	// HeadlinePlotFile is a copy of the report's first figure (the first group's metrics
	// against load, or its TTFT CDFs with one load level) beside summary.json.
	HeadlinePlotFile = "summary.png"
	// VLLMMetricsFile holds, per run, the scraped vLLM servers' histogram deltas
	// (VLLMMetrics); only a live run whose load generator scraped /metrics has one.
	VLLMMetricsFile = "vllm-metrics.json"
)

type summaryFile struct {
	Runs []Run `json:"runs"`
	// Policies holds each policy's metrics over its replications, per group and load level
	// (package report writes them): derived from Runs and ignored by ReadSummary.
	Policies json.RawMessage `json:"policies,omitempty"`
}

type seriesRun struct {
	Name string `json:"name"`
	*Series
}

type seriesFile struct {
	Runs []seriesRun `json:"runs"`
}

// WriteSeriesJSON writes the runs' series as one JSON document with one run per line.
func WriteSeriesJSON(w io.Writer, runs []Run) error {
	var buf bytes.Buffer
	buf.WriteString("{\"runs\": [\n")
	for i, r := range runs {
		s := r.Series
		if s == nil {
			s = &Series{}
		}
		b, err := json.Marshal(seriesRun{Name: r.Name, Series: s})
		if err != nil {
			return fmt.Errorf("results: encoding series of run %q: %w", r.Name, err)
		}
		buf.Write(b)
		if i < len(runs)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("]}\n")
	_, err := w.Write(buf.Bytes())
	return err
}

// ReadSummary reads the runs of a results directory: path is the directory or its
// summary.json. When series.json lies beside it, each run's Series is read from it too.
// Decoding is strict: unknown fields, trailing data and duplicate run names are errors, and
// every error names the file. Scenario numbers come back as json.Number, so they round-trip
// exactly.
func ReadSummary(path string) ([]Run, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, SummaryJSONFile)
	}
	var sf summaryFile
	if err := decodeStrict(path, &sf); err != nil {
		return nil, err
	}
	if sf.Runs == nil {
		return nil, fmt.Errorf("results: %s: no \"runs\" array", path)
	}
	if err := ValidateRuns(sf.Runs); err != nil {
		return nil, fmt.Errorf("results: %s: %w", path, err)
	}
	spath := filepath.Join(filepath.Dir(path), SeriesFile)
	var ser seriesFile
	switch err := decodeStrict(spath, &ser); {
	case errors.Is(err, fs.ErrNotExist):
		return sf.Runs, nil
	case err != nil:
		return nil, err
	}
	byName := map[string]*Series{}
	for _, s := range ser.Runs {
		byName[s.Name] = s.Series
	}
	for i := range sf.Runs {
		sf.Runs[i].Series = byName[sf.Runs[i].Name]
	}
	return sf.Runs, nil
}

// decodeStrict decodes the JSON file at path into v, rejecting unknown fields and trailing data.
func decodeStrict(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("results: %s: %w", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("results: %s: trailing data after the JSON document", path)
	}
	return nil
}
