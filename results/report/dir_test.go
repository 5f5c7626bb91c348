package report

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"kvroute/results"
	"kvroute/results/resultstest"
)

func TestReadSummaryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	runs, _ := resultstest.Runs()
	for name, write := range map[string]func(*bytes.Buffer) error{
		results.SummaryJSONFile: func(b *bytes.Buffer) error { return WriteSummaryJSON(b, runs) },
		results.SeriesFile:      func(b *bytes.Buffer) error { return results.WriteSeriesJSON(b, runs) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{dir, filepath.Join(dir, results.SummaryJSONFile)} {
		got, err := results.ReadSummary(path)
		if err != nil {
			t.Fatal(err)
		}
		var want, back bytes.Buffer
		if err := WriteSummaryJSON(&want, runs); err != nil {
			t.Fatal(err)
		}
		if err := WriteSummaryJSON(&back, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), back.Bytes()) {
			t.Errorf("%s: summary does not round-trip:\n%s", path, firstDiff(want.Bytes(), back.Bytes()))
		}
		for i := range runs {
			if !reflect.DeepEqual(got[i].Series, runs[i].Series) {
				t.Errorf("%s: run %q: series does not round-trip", path, runs[i].Name)
			}
		}
	}
}

func TestWriteDirRejectsBadRuns(t *testing.T) {
	cases := []struct {
		name string
		runs []results.Run
		want string
	}{
		{"nameless", []results.Run{{Policy: "p"}}, "no name"},
		{"duplicate", []results.Run{{Name: "a"}, {Name: "a"}}, "duplicate"},
		{"unencodable scenario", []results.Run{{Name: "a", Scenario: map[string]any{"f": func() {}}}}, "scenario"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteDir(t.TempDir(), tc.runs, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "results: ") {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteDirEdgeCases(t *testing.T) {
	one := results.NewCollector(results.CollectorOpts{Name: "one", Policy: "p", Group: "g", RequestRate: 1})
	one.Add(&results.Record{Tenant: "a", Status: results.StatusCompleted, FirstToken: 5 * time.Millisecond, Finish: 5 * time.Millisecond, OutputTokens: 1, Reason: "only"})
	one.Add(&results.Record{Tenant: "b", Status: results.StatusCompleted, FirstToken: 5 * time.Millisecond, Finish: 5 * time.Millisecond, OutputTokens: 1})
	failed := results.NewCollector(results.CollectorOpts{Name: "failed", Policy: "p", Group: "g", RequestRate: 2})
	failed.Add(&results.Record{Status: results.StatusRejected, Error: "no endpoint"})
	runs := []results.Run{
		one.Run(), failed.Run(),
		{Name: "no series", Policy: "q", Group: "g", RequestRate: 2},
		results.NewCollector(results.CollectorOpts{Name: "empty", Policy: "q"}).Run(),
		{Name: "odd | name\nwith newline", Policy: "q|r", Group: "g/h i", Metrics: results.Metrics{Reasons: map[string]int{"x": 1}}},
	}
	dir := t.TempDir()
	if err := WriteDir(dir, runs, []byte{}); err != nil {
		t.Fatal(err)
	}
	got, err := results.ReadSummary(dir)
	if err != nil || len(got) != len(runs) {
		t.Fatalf("read back %d runs, %v", len(got), err)
	}
	if err := WriteTable(&bytes.Buffer{}, runs); err != nil {
		t.Fatal(err)
	}
}
