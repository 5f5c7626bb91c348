package results

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReadSummaryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	runs, _ := fixtureRuns()
	for name, write := range map[string]func(*bytes.Buffer) error{
		SummaryJSONFile: func(b *bytes.Buffer) error { return WriteSummaryJSON(b, runs) },
		SeriesFile:      func(b *bytes.Buffer) error { return writeSeriesJSON(b, runs) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{dir, filepath.Join(dir, SummaryJSONFile)} {
		got, err := ReadSummary(path)
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

func TestReadSummaryErrors(t *testing.T) {
	const good = `{"runs": [{"name": "a", "policy": "p", "scenario": {}, "metrics": {}}]}`
	cases := []struct {
		name, summary, series, want string
	}{
		{"ok without series", good, "", ""},
		{"unknown run field", `{"runs": [{"name": "a", "colour": 1}]}`, "", `unknown field "colour"`},
		{"unknown metric", `{"runs": [{"name": "a", "metrics": {"ttft": 1}}]}`, "", `unknown field "ttft"`},
		{"trailing data", good + "{}", "", "trailing data"},
		{"no runs", `{}`, "", `no "runs"`},
		{"duplicate names", `{"runs": [{"name": "a"}, {"name": "a"}]}`, "", `duplicate name "a"`},
		{"nameless run", `{"runs": [{"policy": "p"}]}`, "", "has no name"},
		{"bad series", good, `{"runs": [{"name": "a", "ttft_cdf": [[1]]}]}`, SeriesFile},
		{"series unknown field", good, `{"runs": [{"name": "a", "x": 1}]}`, `unknown field "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name, body string) {
				if body == "" {
					return
				}
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(SummaryJSONFile, tc.summary)
			write(SeriesFile, tc.series)
			_, err := ReadSummary(dir)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "results: ") ||
				!strings.Contains(err.Error(), dir) {
				t.Errorf("err = %v, want one naming the file and containing %q", err, tc.want)
			}
		})
	}
	if _, err := ReadSummary(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestWriteDirRejectsBadRuns(t *testing.T) {
	cases := []struct {
		name string
		runs []Run
		want string
	}{
		{"nameless", []Run{{Policy: "p"}}, "no name"},
		{"duplicate", []Run{{Name: "a"}, {Name: "a"}}, "duplicate"},
		{"unencodable scenario", []Run{{Name: "a", Scenario: map[string]any{"f": func() {}}}}, "scenario"},
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
	one := NewCollector(CollectorOpts{Name: "one", Policy: "p", Group: "g", RequestRate: 1})
	one.Add(&Record{Tenant: "a", Status: StatusCompleted, FirstToken: 5 * ms, Finish: 5 * ms, OutputTokens: 1, Reason: "only"})
	one.Add(&Record{Tenant: "b", Status: StatusCompleted, FirstToken: 5 * ms, Finish: 5 * ms, OutputTokens: 1})
	failed := NewCollector(CollectorOpts{Name: "failed", Policy: "p", Group: "g", RequestRate: 2})
	failed.Add(&Record{Status: StatusRejected, Error: "no endpoint"})
	runs := []Run{
		one.Run(), failed.Run(),
		{Name: "no series", Policy: "q", Group: "g", RequestRate: 2},
		NewCollector(CollectorOpts{Name: "empty", Policy: "q"}).Run(),
		{Name: "odd | name\nwith newline", Policy: "q|r", Group: "g/h i", Metrics: Metrics{Reasons: map[string]int{"x": 1}}},
	}
	dir := t.TempDir()
	if err := WriteDir(dir, runs, []byte{}); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSummary(dir)
	if err != nil || len(got) != len(runs) {
		t.Fatalf("read back %d runs, %v", len(got), err)
	}
	if err := WriteTable(&bytes.Buffer{}, runs); err != nil {
		t.Fatal(err)
	}
}
