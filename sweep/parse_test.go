package sweep

import (
	"strings"
	"testing"
)

const file = `name: t
seed: 3
requests: 50
fleet: {replicas: [2, 4], gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1}
workload: {kind: shared-prefix, groups: 4, prompts_per_group: 4, system_prompt_tokens: 256, question_tokens: 16, output_tokens: 8}
arrival: {process: poisson, rate: [10, 20]}
router: {metrics_interval: 50ms}
policies: [round-robin, {name: prefix-cache, block_size: 64}]
`

func TestParseExpandsAxesAndKeysLoads(t *testing.T) {
	points, err := Expand([]byte(file), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var labels, keys, groups []string
	for _, p := range points {
		labels = append(labels, p.Label())
		keys = append(keys, p.LoadKey())
		groups = append(groups, p.Group())
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", p.Label(), err)
		}
	}
	cases := []struct{ got, want string }{
		{strings.Join(labels, " "), "replicas=2,rate=10 replicas=2,rate=20 replicas=4,rate=10 replicas=4,rate=20"},
		{strings.Join(keys, " "), "rate=10 rate=20 rate=10 rate=20"},
		{strings.Join(groups, "|"), "t replicas=2|t replicas=2|t replicas=4|t replicas=4"},
		{points[1].Policies[1].Label(), "prefix-cache,block_size=64"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if points[0].WorkloadSeed() != points[3].WorkloadSeed() || points[0].WorkloadSeed() == points[0].RouterSeed() {
		t.Error("every point of a file must share the workload seed, distinct from the router seed")
	}
}

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	bad := strings.Replace(file, "metrics_interval: 50ms", "metrics_interval: soon", 1)
	_, err := Expand([]byte(bad), "t.yaml")
	if err == nil || !strings.Contains(err.Error(), "t.yaml") || !strings.Contains(err.Error(), "line 7") ||
		!strings.Contains(err.Error(), "field router.metrics_interval") {
		t.Fatalf("error %v: want the file, line 7 and field router.metrics_interval", err)
	}
}

// TestParseErrorsAfterAnAxisNameTheirOwnLine checks that an unknown key below a swept list
// is reported at its own line and path, although expansion replaced the list by one value.
func TestParseErrorsAfterAnAxisNameTheirOwnLine(t *testing.T) {
	bad := "# a comment\n\nfleet:\n  replicas: [2, 4]\n\n  gpu: H100-SXM-80GB\n  bogus: 3\n"
	_, err := Expand([]byte(bad), "t.yaml")
	if err == nil || !strings.Contains(err.Error(), "t.yaml: line 7 (field fleet.bogus)") {
		t.Fatalf("error %v: want t.yaml: line 7 (field fleet.bogus)", err)
	}
}

func TestValidate(t *testing.T) {
	noCap := strings.Replace(file, "requests: 50\n", "", 1)
	points, err := Expand([]byte(noCap), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := points[0].Validate(); err == nil || !strings.Contains(err.Error(), "requests or duration") {
		t.Fatalf("Validate without a cap: %v", err)
	}
}

// TestStagesEndTheRun checks that a staged arrival needs no requests or duration cap, and
// that its list of stages is not taken for a sweep axis.
func TestStagesEndTheRun(t *testing.T) {
	staged := strings.Replace(strings.Replace(file, "requests: 50\n", "", 1),
		"arrival: {process: poisson, rate: [10, 20]}", "arrival: {stages: [{rate: 10, duration: 2s}, {rate: 20, duration: 1s}]}", 1)
	points, err := Expand([]byte(staged), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 {
		t.Fatalf("%d points, want 2 (replicas only)", len(points))
	}
	for _, p := range points {
		if err := p.Validate(); err != nil || len(p.Arrival.Stages) != 2 {
			t.Errorf("%s: %v, %d stages", p.Label(), err, len(p.Arrival.Stages))
		}
	}
}

func TestReplications(t *testing.T) {
	tests := []struct {
		name, line string
		reps       int
		err        string
	}{
		{"absent", "", 1, ""},
		{"five", "replications: 5\n", 5, ""},
		{"negative", "replications: -1\n", 0, "replications: want 0..1000, got -1"},
		{"huge", "replications: 1001\n", 0, "replications: want 0..1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			points, err := Expand([]byte(strings.Replace(file, "seed: 3\n", "seed: 3\n"+tc.line, 1)), "t.yaml")
			if err != nil {
				t.Fatal(err)
			}
			p := points[0]
			err = p.Validate()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Validate: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || p.Reps() != tc.reps {
				t.Fatalf("Reps %d err %v, want %d", p.Reps(), err, tc.reps)
			}
			seen := map[uint64]bool{}
			for r := range p.Reps() {
				seen[p.WorkloadSeedOf(r)] = true
				seen[p.RouterSeedOf(r)] = true
				if p.WorkloadSeedOf(r) != points[3].WorkloadSeedOf(r) {
					t.Errorf("replication %d: points of one file must share the workload seed", r)
				}
			}
			if len(seen) != 2*p.Reps() {
				t.Errorf("%d distinct seeds over %d replications, want %d", len(seen), p.Reps(), 2*p.Reps())
			}
			if p.WorkloadSeedOf(0) != p.WorkloadSeed() || p.RouterSeedOf(0) != p.RouterSeed() {
				t.Error("replication 0 must keep the file's seeds")
			}
		})
	}
}
