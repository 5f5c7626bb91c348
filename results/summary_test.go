package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
