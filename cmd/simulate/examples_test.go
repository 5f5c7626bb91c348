package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"kvroute/results/report"
	"kvroute/sweep"
)

// exampleReductions shrink a sweep file to test size, each applied to every line it matches:
// fewer requests, a shorter run and shorter load stages, two replications where there were
// several, and short outputs.
var exampleReductions = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?m)^requests: \d+`), "requests: 120"},
	{regexp.MustCompile(`(?m)^duration: \S+`), "duration: 4s"},
	{regexp.MustCompile(`(?m)^replications: \d+`), "replications: 2"},
	{regexp.MustCompile(`(?m)^(\s+- \{rate: [\d.]+, )duration: \d+s`), "${1}duration: 1s"},
	{regexp.MustCompile(`\boutput_tokens: \d+`), "output_tokens: 16"},
}

// exampleCost sorts the example files by their time at test size: -short skips the heavy
// ones, and -race (several times slower, beside the package's fidelity test) runs only the
// light ones; an unlisted file counts as heavy.
var exampleCost = map[string]string{
	"tenant-flood.yaml": "light", "sglang-v0.4.yaml": "light", "sglang-v0.4-5-per-group.yaml": "light",
	"kubeai-prefix-hash.yaml": "light", "mooncake-trace.yaml": "medium", "offload.yaml": "medium", "pd.yaml": "medium", "llm-d-tiered-prefix-cache.yaml": "medium", "offload-eviction.yaml": "medium", "llm-d-kv-cache-wins.yaml": "medium",
	"llm-d-pd-disaggregation.yaml": "medium", "distserve-2p1d.yaml": "medium", "distserve-colocated-v0.yaml": "medium",
}

// skipExample reports why the file is skipped in this test binary, or "".
func skipExample(file string) string {
	switch cost := exampleCost[file]; {
	case raceEnabled && cost != "light":
		return "slow under -race"
	case testing.Short() && cost == "":
		return "heavy at test size"
	}
	return ""
}

// TestExamplesAnswerEveryPolicy runs every sweep file of examples/ and examples/published/,
// reduced, and checks the report answers it: every configured point compares every policy
// configured there, the answer names more than one policy where more than one ran, latency
// intervals stay above zero, a scenario with tenants is answered on fairness, and a load
// ladder is plotted per stage.
func TestExamplesAnswerEveryPolicy(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	published, _ := filepath.Glob(filepath.Join("..", "..", "examples", "published", "*.yaml"))
	files = append(files, published...)
	if len(files) < 8 {
		t.Fatalf("found %d example files, want the examples and published ones", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if why := skipExample(filepath.Base(f)); why != "" {
				t.Skip(why)
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			s := string(src)
			for _, r := range exampleReductions {
				s = r.re.ReplaceAllString(s, r.with)
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, filepath.Base(f))
			if err := os.WriteFile(cfg, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			// Paths in the examples (traces, catalogs) are relative to the repository root.
			chdir(t, filepath.Join("..", ".."))
			points, err := sweep.Parse([]byte(s), cfg)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			runSim(t, "-config", cfg, "-out", out, "-quiet")
			checkExampleAnswer(t, out, points)
		})
	}
}

// chdir changes the working directory for the rest of the test.
func chdir(t *testing.T, dir string) {
	t.Helper()
	old, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(old) })
}

// checkExampleAnswer checks a results directory against the points that made it.
func checkExampleAnswer(t *testing.T, out string, points []sweep.Point) {
	t.Helper()
	want := map[string][]string{} // group → the policies configured at its points
	tenants, tier, staged := false, false, map[string]bool{}
	for _, p := range points {
		tier = tier || slices.ContainsFunc(p.Axes, func(a sweep.AxisValue) bool { return a.Path == "fleet.kv_offloading_size" })
		for _, ps := range p.Policies {
			if !slices.Contains(want[p.Group()], ps.Label()) {
				want[p.Group()] = append(want[p.Group()], ps.Label())
			}
		}
		tenants = tenants || len(p.File.Workload.Tenants) > 1
		staged[p.Group()] = len(p.Arrival.Stages) > 0
	}
	var sum struct {
		Policies []report.PolicySummary `json:"policies"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(out, "summary.json")), &sum); err != nil {
		t.Fatal(err)
	}
	compared := map[string][]string{} // group and rate → the policies compared there
	for _, ps := range sum.Policies {
		k := ps.Group + " @ " + jsonFloat(ps.RequestRate)
		compared[k] = append(compared[k], ps.Policy)
		if !slices.Contains(want[ps.Group], ps.Policy) {
			t.Errorf("%s: policy %q was not configured", k, ps.Policy)
		}
	}
	for k, got := range compared {
		if g := k[:strings.LastIndex(k, " @ ")]; len(got) != len(want[g]) {
			t.Errorf("%s compares %d policies %v, want all %d configured", k, len(got), got, len(want[g]))
		}
	}
	md := string(mustRead(t, filepath.Join(out, "report.md")))
	answer := md[:strings.Index(md, report.SectionVerdict)]
	for g, pols := range want {
		para := answer[strings.Index(answer, "**"+g+"**"):]
		if i := strings.Index(para[2:], "\n**"); i >= 0 {
			para = para[:i+2]
		}
		named := 0
		for _, p := range pols {
			if strings.Contains(para, p+" ") {
				named++
			}
		}
		if len(pols) > 1 && (named < 2 || strings.Contains(para, "Only one policy ran")) {
			t.Errorf("answer for %s names %d of %d policies:\n%s", g, named, len(pols), para)
		}
		if staged[g] {
			if _, err := os.Stat(filepath.Join(out, report.PlotDir, "stages-"+slug(g)+".png")); err != nil {
				t.Errorf("ladder %s not plotted per stage: %v", g, err)
			}
		}
	}
	if regexp.MustCompile(`ms \[-`).MatchString(md) {
		t.Errorf("a latency interval reaches below zero")
	}
	if tier != strings.Contains(md, "\n"+report.SectionTier+"\n") || tier != strings.Contains(answer, "- CPU tier, for ") {
		t.Errorf("CPU tier axis %v, but the CPU tier section or answer line is present: %v, %v", tier,
			strings.Contains(md, report.SectionTier), strings.Contains(answer, "- CPU tier, for "))
	}
	if tenants != strings.Contains(md, "\n"+report.SectionFairness+"\n") || tenants != strings.Contains(answer, "- Fairness, for ") {
		t.Errorf("tenants %v, but the Fairness section or answer line is present: %v, %v", tenants,
			strings.Contains(md, report.SectionFairness), strings.Contains(answer, "- Fairness, for "))
	}
}

func jsonFloat(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// slug is the report's file-name form of a group name, for the names the examples use.
func slug(g string) string {
	return strings.Trim(regexp.MustCompile(`[^a-z0-9._]+`).ReplaceAllString(strings.ToLower(g), "-"), "-.")
}
