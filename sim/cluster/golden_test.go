package cluster

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenCase is one simulation whose every output is pinned by testdata/<name>.golden: a
// digest of every record (all fields, in the order the sink got them), of the ITL stream (in
// call order) and each replica's final metrics. Any change to what the simulator computes,
// however small, changes a digest.
type goldenCase struct {
	name     string
	cfg      Config
	policy   string
	workload workloads.Config
	seed     uint64
	// want asserts the case still exercises what it is here for.
	want func(t *testing.T, o goldenOutcome)
}

type goldenOutcome struct {
	records     int
	preemptions int
	retries     int
	failed      int
	rejected    int
	itlCalls    int
	replicas    []engine.Metrics
}

func chat(requests int, rate float64) workloads.Config {
	return workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSyntheticChat},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessPoisson, Rate: rate},
		Requests: requests,
	}
}

// smallBatchFleet has a token budget small enough that chunked prefills starve decodes and
// a sequence limit that holds requests back.
func smallBatchFleet(n, blocks, batchTokens, seqs int) []engine.Config {
	out := fleet(n, blocks)
	for i := range out {
		out[i].Deployment.MaxNumBatchedTokens = batchTokens
		out[i].Deployment.MaxNumSeqs = seqs
	}
	return out
}

func goldenCases() []goldenCase {
	pressure := sharedPrefix(16, 400, 40)
	pressure.Workload.OutputTokens = 300
	longChat := chat(600, 6)
	longChat.Workload.SystemPrompts = 4
	longChat.Workload.MaxMessageTokens = 3000
	return []goldenCase{
		{
			name:     "shared-prefix-kv-pressure",
			cfg:      Config{Replicas: fleet(4, 420), Model: model, MetricsInterval: DefaultMetricsInterval, NetworkDelay: time.Millisecond},
			policy:   "prefix-score",
			workload: pressure,
			seed:     11,
			want: func(t *testing.T, o goldenOutcome) {
				if o.preemptions == 0 {
					t.Error("no preemptions: the case no longer puts the KV cache under pressure")
				}
			},
		},
		{
			name:     "chat-prefix-score-fresh",
			cfg:      Config{Replicas: fleet(4, 0), Model: model},
			policy:   "prefix-score",
			workload: chat(1500, 20),
			seed:     12,
		},
		{
			name:     "chat-least-kv-pressure",
			cfg:      Config{Replicas: fleet(3, 2500), Model: model, MetricsInterval: DefaultMetricsInterval},
			policy:   "least-kv-cache",
			workload: chat(1200, 12),
			seed:     13,
			want: func(t *testing.T, o goldenOutcome) {
				if o.preemptions == 0 {
					t.Error("no preemptions: the case no longer puts the KV cache under pressure")
				}
			},
		},
		{
			name: "failures-retries",
			cfg: Config{
				Replicas: fleet(4, 2000), Model: model, MetricsInterval: DefaultMetricsInterval, NetworkDelay: time.Millisecond,
				MaxRetries: DefaultMaxRetries,
				Failures:   []Failure{{Replica: 1, At: 3 * time.Second, RecoverAt: 8 * time.Second}, {Replica: 2, At: 5 * time.Second}},
			},
			policy:   "prefix-cache",
			workload: sharedPrefix(8, 300, 30),
			seed:     14,
			want: func(t *testing.T, o goldenOutcome) {
				if o.retries == 0 {
					t.Error("no retries: the failures no longer hit requests in flight")
				}
			},
		},
		{
			name: "chat-failures-no-delay",
			cfg: Config{
				Replicas: fleet(3, 3000), Model: model, MaxRetries: DefaultMaxRetries,
				Failures: []Failure{{Replica: 0, At: 4 * time.Second, RecoverAt: 6 * time.Second}},
			},
			policy:   "least-kv-cache",
			workload: chat(800, 15),
			seed:     15,
			want: func(t *testing.T, o goldenOutcome) {
				if o.retries == 0 {
					t.Error("no retries: the failure no longer hits requests in flight")
				}
			},
		},
		{
			name:     "chat-chunked-starved",
			cfg:      Config{Replicas: smallBatchFleet(2, 1500, 384, 24), Model: model, MetricsInterval: DefaultMetricsInterval},
			policy:   "prefix-score",
			workload: longChat,
			seed:     16,
			want: func(t *testing.T, o goldenOutcome) {
				if o.preemptions == 0 {
					t.Error("no preemptions")
				}
			},
		},
		{
			name:     "chat-round-robin-rejects",
			cfg:      Config{Replicas: fleet(2, 150), Model: model, MetricsInterval: 10 * time.Millisecond},
			policy:   "round-robin",
			workload: chat(400, 8),
			seed:     17,
			want: func(t *testing.T, o goldenOutcome) {
				if o.rejected == 0 || o.preemptions == 0 {
					t.Errorf("rejected %d, preemptions %d: want both", o.rejected, o.preemptions)
				}
			},
		},
	}
}

// runGolden runs c and returns the golden text and the outcome.
func runGolden(t *testing.T, c goldenCase) (string, goldenOutcome) {
	t.Helper()
	p, err := router.Builtin().New(c.policy, nil, c.seed)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := workloads.Build(c.workload, c.seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	agg := results.NewAggregator()
	recHash, itlHash := sha256.New(), sha256.New()
	var o goldenOutcome
	s, err := New(c.cfg, p, stream, Sink{
		Record: func(r *results.Record) {
			// The P/D fields, empty on these aggregated fleets, are left out, so that the
			// hashes stay those of the records before split fleets existed.
			fmt.Fprintln(recHash, strings.Replace(fmt.Sprintf("%+v", *r), " PrefillEndpoint: KVTransfer:0s", "", 1))
			o.records++
			o.preemptions += r.Preemptions
			o.retries += r.Retries
			switch r.Status {
			case results.StatusFailed:
				o.failed++
			case results.StatusRejected:
				o.rejected++
			}
			agg.Add(r)
		},
		ITL: func(d time.Duration, tokens int) {
			fmt.Fprintf(itlHash, "%d %d\n", d, tokens)
			o.itlCalls++
			agg.AddITL(d, tokens)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := agg.Metrics()
	var b strings.Builder
	fmt.Fprintf(&b, "case %s\npolicy %s seed %d\n", c.name, c.policy, c.seed)
	fmt.Fprintf(&b, "end %v\n", s.Now())
	fmt.Fprintf(&b, "records %d completed %d failed %d rejected %d preemptions %d retries %d\n",
		o.records, m.Completed, o.failed, o.rejected, o.preemptions, o.retries)
	fmt.Fprintf(&b, "hit_rate %v ttft_p50_ms %v tpot_p50_ms %v itl_p99_ms %v\n", m.HitRate, m.TTFT.P50, m.TPOT.P50, m.ITL.P99)
	fmt.Fprintf(&b, "records_sha256 %s\n", sum(recHash))
	fmt.Fprintf(&b, "itl_calls %d itl_sha256 %s\n", o.itlCalls, sum(itlHash))
	for i := range c.cfg.Replicas {
		rm := s.Replica(i).Metrics()
		o.replicas = append(o.replicas, rm)
		fmt.Fprintf(&b, "replica %d %+v\n", i, rm)
	}
	for i, e := range s.Endpoints() {
		e.Prefill = nil // a pointer: not part of the golden output
		fmt.Fprintf(&b, "endpoint %d %+v\n", i, e)
	}
	return b.String(), o
}

func sum(h hash.Hash) string { return fmt.Sprintf("%x", h.Sum(nil)) }

// TestGolden pins everything the simulator computes for a set of representative runs: KV
// pressure with preemptions, multi-turn chat, failures with retries, chunked prefill under a
// small token budget, rejections; fresh and 50 ms scraped metrics; several policies. Refresh
// with go test -run TestGolden -update only for a change meant to alter results.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			got, o := runGolden(t, c)
			if c.want != nil {
				c.want(t, o)
			}
			for i, m := range o.replicas {
				if m.Running != 0 || m.Waiting != 0 {
					t.Errorf("replica %d: %d running, %d waiting after the run", i, m.Running, m.Waiting)
				}
			}
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("results differ from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}
