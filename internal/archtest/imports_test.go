package archtest

import (
	"bufio"
	"bytes"
	"os/exec"

	"strings"
	"testing"
)

const module = "kvroute"

// allowed lists, per package of the module, the non-standard-library imports it may use:
// exact import paths, or prefixes ending in "/..." meaning the path and everything below it.
// A package missing from the table fails the test, so a new package needs a row (and a reason).
var allowed = map[string][]string{
	"router":              {"kvroute/router/..."},
	"router/prefix":       {"github.com/cespare/xxhash/v2", "kvroute/blockhash", "kvroute/internal/table"}, // blockhash: the engine's block key, for KV-event routing
	"blockhash":           {"github.com/zeebo/xxh3"},                                                       // the KV block key, one definition for engine and routers
	"router/tokenize":     {"github.com/pkoukk/tiktoken-go", "github.com/pkoukk/tiktoken-go-loader"},
	"router/routertest":   {"kvroute/router/...", "github.com/google/go-cmp/..."},
	"gpumodel":            {},
	"workloads":           {"kvroute/internal/strictyaml", "kvroute/internal/spares"},
	"sim":                 {},
	"sim/engine":          {"kvroute/sim", "kvroute/gpumodel", "kvroute/blockhash", "kvroute/internal/table", "kvroute/sim/engine/internal/hugepage"}, // blockhash: routers compute the same block keys
	"sim/cluster":         {"kvroute/sim/...", "kvroute/router/...", "kvroute/workloads", "kvroute/results", "kvroute/gpumodel", "kvroute/internal/spares"},
	"results":             {}, // records, metrics and summary I/O: what the simulator and loadgen link
	"results/stats":       {"gonum.org/v1/gonum/..."},
	"results/report":      {"kvroute/results", "kvroute/results/stats", "gonum.org/v1/plot/...", "github.com/olekukonko/tablewriter/...", "github.com/yuin/goldmark/..."},
	"results/resultstest": {"kvroute/results"},
	"internal/openai":     {"github.com/go-json-experiment/json/..."},
	"internal/vllm":       {"github.com/prometheus/common/...", "github.com/prometheus/client_model/...", "github.com/go-json-experiment/json/..."},
	"internal/gateway":    {"kvroute/router/...", "kvroute/internal/openai", "kvroute/internal/vllm", "kvroute/internal/kvevents", "github.com/prometheus/client_golang/...", "github.com/cespare/xxhash/v2", "github.com/hashicorp/golang-lru/v2/..."},
	"internal/emulate":    {"kvroute/sim/...", "kvroute/gpumodel", "kvroute/internal/openai", "kvroute/internal/vllm", "kvroute/internal/kvevents", "kvroute/workloads"},
	"internal/kvevents":   {"kvroute/router/prefix", "github.com/go-zeromq/zmq4/...", "github.com/vmihailenco/msgpack/v5/...", "github.com/cespare/xxhash/v2"},
	"internal/loadgen":    {"kvroute/workloads", "kvroute/results", "kvroute/internal/openai", "kvroute/internal/vllm"},
	// sim/engine/internal/hugepage: huge-page advice for the engine's block-pool tables.
	"sim/engine/internal/hugepage": {"golang.org/x/sys/unix"},
	// internal/spares: the bounded free list of ended objects that workloads and sim/cluster
	// reuse, a leaf with no imports. sync.Pool in its place doubled the default sweep's CPU time.
	"internal/spares":     {},
	"internal/archtest":   {},
	"internal/table":      {},                                                        // the open-addressing table of hash keys that router/prefix and sim/engine share
	"internal/strictyaml": {"go.yaml.in/yaml/v3"},                                    // the one strict decoder of YAML config files
	"internal/benchtest":  {"kvroute/router/routertest", "kvroute/internal/nettest"}, // the proxy benchmarks' harness
	"internal/e2e":        {},
	"internal/nettest":    {}, // loopback helpers for tests over real sockets
	"internal/docref":     {}, // the generated reference of flags and config keys (docs/reference)
	// internal/calibrate: published points simulated; fits to measured runs (gonum/optimize).
	"internal/calibrate": {"kvroute/sim/...", "kvroute/router", "kvroute/workloads", "kvroute/results", "kvroute/gpumodel", "gonum.org/v1/gonum/optimize"},
	// internal/tune: a policy's parameters searched with the sweep runner in the loop,
	// compared with results/stats; its plot is drawn by results/report, from cmd.
	"internal/tune": {"kvroute/sweep", "kvroute/router", "kvroute/results", "kvroute/results/stats"},
	// sweep: the sweep files (parse, points, the policy-spec and fleet decoders cmd/route and
	// cmd/emulate share, which resolve fleets into engine configurations) and their runs.
	"sweep": {"kvroute/workloads", "kvroute/results", "kvroute/sim/...", "kvroute/gpumodel", "kvroute/router", "kvroute/router/tokenize", "go.yaml.in/yaml/v3", "kvroute/internal/strictyaml"},
}

// forbiddenStd lists standard-library packages a deterministic, I/O-free core package must not
// import directly: no network, no logger, no environment or files.
var forbiddenStd = []string{"net", "net/http", "log", "log/slog", "os", "os/exec", "math/rand"}

// pure marks the packages (and their subpackages) that forbiddenStd applies to.
var pure = []string{"router", "sim", "gpumodel", "internal/table"}

type pkg struct {
	path    string // relative to the module, e.g. "router/prefix"
	imports []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		pkgs = append(pkgs, pkg{path: rel, imports: f[1:]})
	}
	return pkgs
}

func isStd(imp string) bool {
	return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !strings.HasPrefix(imp, module)
}

func matches(imp string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if imp == base || strings.HasPrefix(imp, base+"/") {
				return true
			}
		} else if imp == p {
			return true
		}
	}
	return false
}

func rowFor(rel string) ([]string, bool) {
	if strings.HasPrefix(rel, "cmd/") || rel == "cmd" {
		return nil, true // commands may import anything
	}
	row, ok := allowed[rel]
	return row, ok
}

func underAny(rel string, roots []string) bool {
	for _, r := range roots {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return true
		}
	}
	return false
}

func TestImportTable(t *testing.T) {
	for _, p := range listPackages(t) {
		row, ok := rowFor(p.path)
		if !ok {
			t.Errorf("package %s has no row in the import table: add one", p.path)
			continue
		}
		if strings.HasPrefix(p.path, "cmd") {
			continue
		}
		for _, imp := range p.imports {
			if isStd(imp) {
				if underAny(p.path, pure) && matches(imp, forbiddenStd) {
					t.Errorf("%s imports %s: the deterministic core does no I/O, logging or global randomness", p.path, imp)
				}
				continue
			}
			if !matches(imp, row) {
				t.Errorf("%s imports %s, which its row %v does not allow", p.path, imp, row)
			}
		}
	}
}

// TestRouterNeverReachesHTTP walks router's transitive imports. The only way it may reach
// net/http is through the tiktoken library that router/tokenize is allowed to use (its
// downloader is linked but never called: the BPE ranks are embedded).
func TestRouterNeverReachesHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/router").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		graph[f[0]] = f[1:]
	}
	sanctioned := []string{"github.com/pkoukk/tiktoken-go"}
	seen := map[string]string{module + "/router": ""}
	queue := []string{module + "/router"}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if matches(cur, sanctioned) {
			continue
		}
		for _, imp := range graph[cur] {
			if _, ok := seen[imp]; ok {
				continue
			}
			seen[imp] = cur
			queue = append(queue, imp)
		}
	}
	for _, bad := range []string{"net/http", "log", "log/slog", "os/exec"} {
		if via, ok := seen[bad]; ok {
			t.Errorf("router reaches %s (imported by %s)", bad, via)
		}
	}
}

// reportLibraries are the plotting, HTML and table libraries only results/report may link.
var reportLibraries = []string{"gonum.org/v1/plot/...", "github.com/yuin/goldmark/...", "github.com/olekukonko/tablewriter/..."}

// TestRecordsLinkNoReportLibraries checks that the packages which produce records (the
// simulator, the load generator, the sweep runner) link neither results/report nor the
// libraries behind it, directly or transitively.
func TestRecordsLinkNoReportLibraries(t *testing.T) {
	for _, rel := range []string{"results", "results/stats", "sim/cluster", "internal/loadgen", "internal/calibrate", "internal/tune", "sweep"} {
		out, err := exec.Command("go", "list", "-e", "-deps", module+"/"+rel).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", rel, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"/results/report" || matches(dep, reportLibraries) {
				t.Errorf("%s links %s: only results/report may link plotting, HTML and table libraries", rel, dep)
			}
		}
	}
}
