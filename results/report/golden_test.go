package report

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"kvroute/results"

	"kvroute/results/resultstest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name.golden, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test -update to accept):\n%s", name, path, firstDiff(want, got))
	}
}

// firstDiff shows the first differing line.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + itoa(i+1) + ":\nwant: " + wl + "\ngot:  " + gl
		}
	}
	return "(same lines, different bytes)"
}

func itoa(i int) string { return strconv.Itoa(i) }

// writeFixtureDir writes the fixture runs, and their records as requests.csv, into a new
// temporary directory.
func writeFixtureDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	runs, recs := resultstest.Runs()
	if err := WriteDir(dir, runs, []byte("seed: 42\npolicies: [prefix-hash, least-request]\n")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, results.RequestsFile))
	if err != nil {
		t.Fatal(err)
	}
	w, err := results.NewRequestsCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		for i := range recs[r.Name] {
			if err := w.Write(r.Name, &recs[r.Name][i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dirFiles returns every file under dir by slash-separated relative path.
func dirFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestWriteDirGoldenAndDeterministic(t *testing.T) {
	first := dirFiles(t, writeFixtureDir(t))
	for _, name := range []string{results.SummaryJSONFile, results.SummaryCSVFile, results.ReportFile, results.RequestsFile, results.SeriesFile, results.ConfigFile} {
		golden(t, name, first[name])
	}
	var table bytes.Buffer
	runs, _ := resultstest.Runs()
	if err := WriteTable(&table, runs); err != nil {
		t.Fatal(err)
	}
	golden(t, "table.txt", table.Bytes())

	second := dirFiles(t, writeFixtureDir(t))
	if len(first) != len(second) {
		t.Fatalf("first write has %d files, second %d", len(first), len(second))
	}
	pngs := 0
	for name, b := range first {
		if !bytes.Equal(b, second[name]) {
			t.Errorf("%s differs between two writes of the same runs", name)
		}
		if strings.HasSuffix(name, ".png") {
			pngs++
			if _, err := png.Decode(bytes.NewReader(b)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if name != results.HeadlinePlotFile && !strings.Contains(string(first[results.ReportFile]), "]("+name+")") {
				t.Errorf("report.md does not link %s", name)
			}
		}
	}
	if pngs == 0 {
		t.Error("no plots written")
	}
}
