package cluster

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/router"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// pdFleet returns a split fleet of prefill then decode replicas of Llama-3.1-8B on H100,
// with NICs of gbps Gbit/s and a 2 ms base latency per transfer.
func pdFleet(prefill, decode int, gbps float64, kv engine.KVTransferConfig) Config {
	reps := fleet(prefill+decode, 5000)
	cfg := Config{Replicas: reps, Model: model, MaxRetries: DefaultMaxRetries,
		KVTransfer: KVTransfer{Gbps: gbps, BaseLatency: 2 * time.Millisecond}}
	for i := range reps {
		reps[i].KVTransfer = kv
		role := RolePrefill
		if i >= prefill {
			role = RoleDecode
		}
		cfg.Roles = append(cfg.Roles, role)
	}
	return cfg
}

// pdPolicy routes both pools round-robin with the named decider.
func pdPolicy(t *testing.T, decider string, params map[string]any) router.PDPolicy {
	t.Helper()
	reg := router.Builtin()
	pre, err := reg.New("round-robin", nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := reg.New("round-robin", nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	d, err := router.NewDecider(decider, params)
	if err != nil {
		t.Fatal(err)
	}
	return router.PDPolicy{Prefill: pre, Decode: dec, Decider: d}
}

// prompts is n requests of one shared 2,048-token system prompt (groups 1) or of
// different ones, plus a 64-token question each, arriving every gap (0: all at once).
func prompts(n, groups int, gap time.Duration) workloads.Config {
	w := sharedPrefix(groups, n, 0)
	w.Workload.PromptsPerGroup, w.Workload.Repeat = n, new(bool) // every question differs
	w.Arrival = workloads.ArrivalConfig{Process: workloads.ProcessImmediate}
	if gap > 0 {
		w.Arrival = workloads.ArrivalConfig{Process: workloads.ProcessConstant, Rate: 1 / gap.Seconds()}
	}
	return w
}

// runPD simulates cfg under p and returns the records by request id, in the order they
// ended, and the simulation.
func runPD(t *testing.T, cfg Config, p router.PDPolicy, w workloads.Config, probe func(*Sim)) ([]results.Record, *Sim) {
	t.Helper()
	stream, err := workloads.Build(w, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var recs []results.Record
	s, err := NewPD(cfg, []router.PDPolicy{p}, stream, Sink{Record: func(r *results.Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	if probe != nil {
		probe(s)
	}
	if err := s.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return recs, s
}

// priced returns what one transfer of tokens prompt tokens takes alone on cfg's links, and
// the step times of a prefill of tokens and of the decode leg's first step.
func priced(t *testing.T, cfg Config, tokens int) (xfer, prefill, first time.Duration) {
	t.Helper()
	d := cfg.Replicas[0].Deployment
	p, err := gpumodel.NewPricer(d)
	if err != nil {
		t.Fatal(err)
	}
	var pre, dec gpumodel.Step
	pre.AddPrefill(tokens, 0)
	dec.AddPrefill(1, tokens-1)
	bytes := float64(d.KVTransferBytes(tokens))
	xfer = cfg.KVTransfer.BaseLatency + time.Duration(math.Ceil(bytes/d.TransferBandwidth(cfg.KVTransfer.Gbps)*1e9))
	return xfer, p.StepTime(pre), p.StepTime(dec)
}

func near(a, b, tol time.Duration) bool { return a-b <= tol && b-a <= tol }

func TestDecodeLegTTFTIsPrefillPlusTransferPlusOneStep(t *testing.T) {
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{})
	recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), nil)
	r := recs[0]
	xfer, prefill, first := priced(t, cfg, r.PromptTokens)
	ttft, _ := r.TTFT()
	if want := prefill + xfer + first; !near(ttft, want, time.Microsecond) {
		t.Fatalf("TTFT %v, want prefill %v + transfer %v + first step %v = %v", ttft, prefill, xfer, first, want)
	}
	if r.PrefillEndpoint != "replica-0" || r.Endpoint != "replica-1" || !near(r.KVTransfer, xfer, time.Microsecond) {
		t.Fatalf("prefill %q decode %q transfer %v, want replica-0, replica-1, %v", r.PrefillEndpoint, r.Endpoint, r.KVTransfer, xfer)
	}
}

func TestConcurrentTransfersShareTheNICs(t *testing.T) {
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{})
	recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(2, 2, 0), nil)
	one, _, _ := priced(t, cfg, recs[0].PromptTokens)
	base := cfg.KVTransfer.BaseLatency
	for _, r := range recs {
		// Both legs prefill in one step, so both reads start together and share both NICs.
		if got, want := r.KVTransfer-base, 2*(one-base); !near(got, want, want/100) {
			t.Fatalf("request %s: transfer %v beyond the base latency, want about twice one alone (%v)", r.ID, got, want)
		}
	}
}

func TestLocalPrefixHitOnDecodeShrinksTheRead(t *testing.T) {
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{})
	recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(2, 1, 5*time.Second), nil)
	first, second := recs[0], recs[1]
	full, _, _ := priced(t, cfg, first.PromptTokens)
	// The second request's 2,048-token system prompt is cached on the decode replica: it
	// reads its last 64 tokens only.
	part, _, _ := priced(t, cfg, second.PromptTokens-2048)
	if !near(first.KVTransfer, full, time.Microsecond) || !near(second.KVTransfer, part, time.Microsecond) {
		t.Fatalf("transfers %v then %v, want %v (whole prompt) then %v (past the local hit)", first.KVTransfer, second.KVTransfer, full, part)
	}
}

// matcher routes every request to endpoint 0 and reports the whole prompt held there.
type matcher struct{}

func (matcher) Name() string { return "matcher" }
func (matcher) Pick(*router.Request, *router.Snapshot) (router.Decision, error) {
	return router.Decision{Index: 0, Reason: "first"}, nil
}
func (matcher) MatchedTokens(req *router.Request, _ *router.Snapshot, _ int) int {
	return req.InputTokens
}

func TestPrefixDeciderKeepsACachedPromptLocal(t *testing.T) {
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{})
	p := pdPolicy(t, "prefix-based", map[string]any{"non_cached_tokens": 16})
	p.Decode = matcher{}
	recs, s := runPD(t, cfg, p, prompts(3, 1, time.Second), nil)
	for _, r := range recs {
		if r.Status != results.StatusCompleted || r.PrefillEndpoint != "" || r.KVTransfer != 0 {
			t.Fatalf("request %s: %v, prefill endpoint %q, transfer %v: want completed on its decode endpoint alone",
				r.ID, r.Status, r.PrefillEndpoint, r.KVTransfer)
		}
	}
	if m := s.Replica(0).Metrics(); m.PromptTokens != 0 {
		t.Fatalf("the prefill replica computed %d prompt tokens, want none", m.PromptTokens)
	}
}

func TestPrefillReplicaFailure(t *testing.T) {
	cases := []struct {
		name       string
		retries    int
		wantStatus results.Status
	}{
		{"retried on the other prefill replica", 1, results.StatusCompleted},
		{"no retries: the request fails", 0, results.StatusFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pdFleet(2, 1, 400, engine.KVTransferConfig{})
			cfg.MaxRetries = tc.retries
			cfg.Failures = []Failure{{Replica: 0, At: 10 * time.Millisecond}} // during the first prefill leg
			recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), nil)
			r := recs[0]
			if r.Status != tc.wantStatus {
				t.Fatalf("status %v (%s), want %v", r.Status, r.Error, tc.wantStatus)
			}
			if tc.wantStatus == results.StatusCompleted && (r.PrefillEndpoint != "replica-1" || r.Retries != 1) {
				t.Fatalf("prefill endpoint %q after %d retries, want replica-1 after 1", r.PrefillEndpoint, r.Retries)
			}
		})
	}
}

func TestReadFailurePolicy(t *testing.T) {
	cases := []struct {
		name       string
		recompute  bool
		wantStatus results.Status
	}{
		{"fail", false, results.StatusFailed},
		{"recompute", true, results.StatusCompleted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// 1 Gbit/s: the read takes seconds, and the prefill replica fails during it.
			cfg := pdFleet(1, 1, 1, engine.KVTransferConfig{Recompute: tc.recompute})
			cfg.Failures = []Failure{{Replica: 0, At: time.Second}}
			recs, s := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), nil)
			r := recs[0]
			if r.Status != tc.wantStatus || tc.wantStatus == results.StatusFailed && !strings.Contains(r.Error, "kv transfer") {
				t.Fatalf("status %v (%s), want %v", r.Status, r.Error, tc.wantStatus)
			}
			m := s.Replica(1).Metrics()
			if recomputed := m.PrefixQueries > 0 && m.GenerationTokens > 1; tc.recompute != recomputed {
				t.Fatalf("decode replica metrics %+v: recomputed %v, want %v", m, recomputed, tc.recompute)
			}
		})
	}
}

// TestPrefillFailureBeforeTheRouterHearsTheLeg fails the prefill replica after its leg ended
// but before its answer reached the router: the blocks the decoder would read are gone, so
// the read fails as it does when the replica fails during the transfer.
func TestPrefillFailureBeforeTheRouterHearsTheLeg(t *testing.T) {
	const delay = 50 * time.Millisecond
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{})
	cfg.NetworkDelay, cfg.MaxRetries = delay, 0
	ok, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), nil)
	if ok[0].Status != results.StatusCompleted {
		t.Fatalf("without the failure: status %v (%s), want completed", ok[0].Status, ok[0].Error)
	}
	_, prefill, _ := priced(t, cfg, ok[0].PromptTokens)
	// The leg reaches the replica after one delay and ends prefill later; its answer
	// reaches the router one delay after that.
	cfg.Failures = []Failure{{Replica: 0, At: delay + prefill + delay/2, RecoverAt: delay + prefill + delay*3/4}}
	recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), nil)
	if r := recs[0]; r.Status != results.StatusFailed || !strings.Contains(r.Error, "kv transfer") {
		t.Fatalf("status %v (%s), want failed: the KV it read was gone", r.Status, r.Error)
	}
}

func TestAbortTimeoutFreesUnreadBlocks(t *testing.T) {
	cfg := pdFleet(1, 1, 400, engine.KVTransferConfig{AbortTimeout: 5 * time.Second})
	cfg.MaxRetries = 0
	// The decode replica is down when the decode leg reaches it: no one reads the blocks.
	cfg.Failures = []Failure{{Replica: 1, At: 10 * time.Millisecond}}
	held := map[time.Duration]int{}
	recs, s := runPD(t, cfg, pdPolicy(t, "always", nil), prompts(1, 1, 0), func(s *Sim) {
		for _, at := range []time.Duration{time.Second, 4 * time.Second, 6 * time.Second} {
			s.k.Schedule(sim.At(at), 2, func(sim.Time) { held[at] = s.Replica(0).Held() })
		}
	})
	if recs[0].Status != results.StatusFailed {
		t.Fatalf("status %v, want failed (its decode replica was down)", recs[0].Status)
	}
	want := map[time.Duration]int{time.Second: 1, 4 * time.Second: 1, 6 * time.Second: 0}
	if fmt.Sprint(held) != fmt.Sprint(want) || s.Replica(0).Metrics().KVUsage != 0 {
		t.Fatalf("prefill legs holding blocks at 1s, 4s, 6s: %v, want %v (abort timeout 5s)", held, want)
	}
}

func TestSplitFleetIsDeterministic(t *testing.T) {
	run := func() string {
		cfg := pdFleet(2, 3, 100, engine.KVTransferConfig{})
		w := sharedPrefix(4, 200, 20)
		recs, _ := runPD(t, cfg, pdPolicy(t, "always", nil), w, nil)
		var b strings.Builder
		for _, r := range recs {
			fmt.Fprintf(&b, "%+v\n", r)
		}
		return b.String()
	}
	a, b := run(), run()
	if a != b {
		t.Fatal("two runs of the same split fleet and seed differ")
	}
	if n := strings.Count(a, "Status:completed"); n != 200 {
		t.Fatalf("%d of 200 requests completed", n)
	}
}
