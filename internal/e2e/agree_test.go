package e2e

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/emulate"
	"kvroute/internal/gateway"
	"kvroute/internal/loadgen"
	"kvroute/internal/nettest"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// agreeSetup is one agreement check: a fleet of identical emulated H100 replicas running
// Llama-3.1-8B behind one router with Policy, and the same fleet in the simulator, both fed
// Workload built from Seed (the policy's seed too).
type agreeSetup struct {
	Policy    string
	Replicas  int
	NumBlocks int // KV capacity of each replica in blocks; 0: the GPU's
	Workload  workloads.Config
	Seed      uint64
	// NetworkDelay is the simulator's one-way router↔replica delay (cluster.Config); the
	// live side has whatever loopback HTTP costs.
	NetworkDelay time.Duration
}

// agreeRun is what one side of an agreement check measured.
type agreeRun struct {
	Metrics results.Metrics
	// Share is the fraction of the requests each endpoint served, by endpoint name.
	Share map[string]float64
	// Reasons counts the requests by the router's decision branch.
	Reasons map[string]int
	// Prompt and Cached are the prompt and cached tokens summed over completed requests.
	Prompt, Cached int
	// EngineTTFT holds each completed request's time to first token on the engine's clock
	// (live: the emulator's X-Kvroute-Engine-Ttft header; simulated: the record's TTFT).
	EngineTTFT []time.Duration
}

// deployment is the replica both sides run.
func (a agreeSetup) deployment() gpumodel.Deployment {
	return gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
}

// live runs a's workload through emulated replicas named as the simulator names its
// replicas, which publish KV events, behind a router that subscribes to them and tokenizes
// through /tokenize, driven by the load generator over loopback HTTP in real time.
func (a agreeSetup) live(t *testing.T) agreeRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := a.deployment()
	pp, err := gpumodel.NewPrefillPredictor(d)
	if err != nil {
		t.Fatal(err)
	}
	gcfg := gateway.DefaultConfig()
	gcfg.Policy, gcfg.Seed, gcfg.DebugHeaders = a.Policy, a.Seed, true
	gcfg.Prefill = map[string]router.PrefillPredictor{}
	var replicas []*emulate.Replica
	defer func() {
		for _, r := range replicas {
			r.Close()
		}
	}()
	for i := range a.Replicas {
		cfg := emulate.DefaultConfig()
		cfg.Model, cfg.Deployment, cfg.NumBlocks, cfg.Addr = model, &d, a.NumBlocks, "127.0.0.1:0"
		cfg.KVEvents = emulate.KVEventsConfig{Endpoint: "tcp://" + nettest.FreeAddr(t), Bind: true}
		r, err := emulate.NewReplica(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, r)
		name := cluster.EndpointID(i)
		gcfg.Backends = append(gcfg.Backends, name+"=http://"+r.Addr())
		gcfg.KVEvents.Connect = append(gcfg.KVEvents.Connect, name+"="+cfg.KVEvents.Endpoint)
		gcfg.Prefill[name] = pp
	}
	gw, err := gateway.New(gcfg, gateway.Options{OnKVError: func(err error) { t.Errorf("kv events: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	go gw.Run(ctx)
	srv := httptest.NewServer(gw)
	defer srv.Close()
	waitReady(t, gw, a.Replicas)
	return a.drive(t, srv.URL)
}

// drive replays a's workload against url with the load generator.
func (a agreeSetup) drive(t *testing.T, url string) agreeRun {
	t.Helper()
	stream, err := workloads.Build(a.Workload, a.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var (
		mu  sync.Mutex
		acc = newAgreeAcc()
	)
	opts := loadgen.DefaultOptions()
	opts.Target, opts.Model = url, model
	if _, err := loadgen.Run(context.Background(), opts, stream, loadgen.Sink{Result: func(r *loadgen.Result) {
		mu.Lock()
		defer mu.Unlock()
		acc.add(&r.Record, r.EngineTTFT, r.EngineTTFT > 0)
	}}); err != nil {
		t.Fatal(err)
	}
	return acc.run()
}

// simulate runs a's workload through the simulator.
func (a agreeSetup) simulate(t *testing.T) agreeRun {
	t.Helper()
	p, err := router.Builtin().New(a.Policy, nil, a.Seed)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := workloads.Build(a.Workload, a.Seed)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	reps := make([]engine.Config, a.Replicas)
	for i := range reps {
		reps[i] = engine.Config{Deployment: a.deployment(), NumBlocks: a.NumBlocks}
	}
	acc := newAgreeAcc()
	cfg := cluster.Config{Replicas: reps, Model: model, MetricsInterval: cluster.DefaultMetricsInterval, NetworkDelay: a.NetworkDelay}
	c, err := cluster.New(cfg, p, stream, cluster.Sink{Record: func(r *results.Record) {
		ttft, ok := r.TTFT()
		acc.add(r, ttft-2*a.NetworkDelay, ok) // the engine's: without the delay there and back
	}, ITL: acc.agg.AddITL})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return acc.run()
}

// agreeAcc accumulates the records of one side.
type agreeAcc struct {
	agg            *results.Aggregator
	count, reasons map[string]int
	n              int
	prompt, cached int
	ttft           []time.Duration
}

func newAgreeAcc() *agreeAcc {
	return &agreeAcc{agg: results.NewAggregator(), count: map[string]int{}, reasons: map[string]int{}}
}

// add counts r; engineTTFT is its engine-side TTFT when ok.
func (a *agreeAcc) add(r *results.Record, engineTTFT time.Duration, ok bool) {
	a.agg.Add(r)
	a.count[r.Endpoint]++
	a.reasons[r.Reason]++
	a.n++
	if r.Status != results.StatusCompleted {
		return
	}
	a.prompt += r.PromptTokens
	a.cached += r.CachedTokens
	if ok {
		a.ttft = append(a.ttft, engineTTFT)
	}
}

func (a *agreeAcc) run() agreeRun {
	out := agreeRun{Metrics: a.agg.Metrics(), Share: map[string]float64{}, Reasons: a.reasons, Prompt: a.prompt, Cached: a.cached, EngineTTFT: a.ttft}
	for e, c := range a.count {
		out.Share[e] = float64(c) / float64(a.n)
	}
	slices.Sort(out.EngineTTFT)
	return out
}

// maxShareDiff is the largest absolute difference of an endpoint's share of requests.
func maxShareDiff(a, b map[string]float64) float64 {
	d := 0.0
	for e, s := range a {
		d = max(d, math.Abs(s-b[e]))
	}
	for e, s := range b {
		d = max(d, math.Abs(s-a[e]))
	}
	return d
}

// quantileMs is the q-quantile of sorted durations, in milliseconds (NaN when empty).
func quantileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := min(int(math.Ceil(q*float64(len(sorted))))-1, len(sorted)-1)
	return float64(sorted[max(i, 0)]) / 1e6
}

// meanMs is the mean of durations in milliseconds (NaN when empty).
func meanMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum) / float64(len(ds)) / 1e6
}

// shares formats a run's per-endpoint shares in endpoint order.
func shares(s map[string]float64) string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := ""
	for _, k := range keys {
		out += fmt.Sprintf(" %s=%.2f", k, s[k])
	}
	return out
}
