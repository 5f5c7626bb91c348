package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"kvroute/gpumodel"
	"kvroute/results"
	"kvroute/router"
	"kvroute/router/routertest"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// lifecycleReplicas is the conformance fleet's size.
const lifecycleReplicas = 3

// lifecycleMaxRetries is the failure rule both drivers run under.
const lifecycleMaxRetries = 2

// lifecycleStream is the conformance script's workload: 12 completions of three groups
// sharing 256-token prefixes, 500 ms apart in simulation (each ends in tens of ms).
func lifecycleStream(t *testing.T) *workloads.Stream {
	t.Helper()
	repeat := true
	stream, err := workloads.Build(workloads.Config{
		Workload: workloads.WorkloadConfig{Kind: workloads.KindSharedPrefix, Groups: 3, PromptsPerGroup: 4,
			SystemPromptTokens: 256, QuestionTokens: 32, OutputTokens: 8, Repeat: &repeat},
		Arrival:  workloads.ArrivalConfig{Process: workloads.ProcessConstant, Rate: 2},
		Requests: 12,
	}, 11, workloads.WithText(true))
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// lifecycleRequests are lifecycleStream's requests.
func lifecycleRequests(t *testing.T) []workloads.Request {
	t.Helper()
	stream := lifecycleStream(t)
	defer stream.Close()
	var reqs []workloads.Request
	for {
		r, ok := stream.Next()
		if !ok {
			break
		}
		reqs = append(reqs, r)
		_ = stream.Done(r.ID, workloads.Completion{At: r.Arrival})
	}
	return reqs
}

// lifecycleDeployment is every replica's: an H100 serving Llama-3.1-8B.
func lifecycleDeployment() gpumodel.Deployment {
	return gpumodel.DefaultDeployment(gpumodel.H100SXM80GB(), gpumodel.Llama31x8B(), 1)
}

// TestLifecycleConformance runs one script of requests, failed attempts, a replica killed
// and revived, through the simulator and through the router over real HTTP in front of
// emulated replicas, for every built-in policy: both must make the policy see the calls a
// router.Lifecycle driven directly makes (ReferenceCalls) — the same decisions, first
// tokens, ends, retries and removals, on the same endpoint ids.
func TestLifecycleConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 17 policies live")
	}
	ws := lifecycleRequests(t)
	rreqs := make([]router.Request, len(ws))
	for i := range ws {
		rreqs[i] = cluster.RouterRequest(&ws[i], model)
	}
	script := routertest.StandardScript(rreqs)
	for _, name := range router.Builtin().Names() {
		t.Run(name, func(t *testing.T) {
			newPolicy := func() router.Policy {
				p, err := router.Builtin().New(name, routertest.ConformanceParams(name), 1)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			simCalls, eps := simulateScript(t, newPolicy, ws, script)
			ref, err := routertest.ReferenceCalls(newPolicy(), idle(eps), script, lifecycleMaxRetries)
			if err != nil {
				t.Fatal(err)
			}
			want := routertest.CanonicalCalls(ref)
			if diff := cmp.Diff(want, routertest.CanonicalCalls(simCalls)); diff != "" {
				t.Errorf("simulator (-reference +sim):\n%s", diff)
			}
			live := runScriptLive(t, newPolicy, ws, script)
			if diff := cmp.Diff(want, routertest.CanonicalCalls(live)); diff != "" {
				t.Errorf("router (-reference +live):\n%s", diff)
			}
		})
	}
}

// idle returns eps as an idle fleet shows them: nothing running, waiting or in use.
func idle(eps []router.EndpointState) []router.EndpointState {
	out := append([]router.EndpointState(nil), eps...)
	for i := range out {
		out[i].Running, out[i].Waiting, out[i].KVUsage, out[i].InFlight, out[i].InFlightTokens = 0, 0, 0, 0, 0
	}
	return out
}

// simulateScript runs the script through the simulator and returns the recorded calls and
// the routers' initial view of the fleet. A failed attempt is a replica failing a nanosecond
// after the request reached it and recovering a nanosecond later (before any scrape, so no
// router ejects it); the kill fails the replica 250 ms after the request's arrival, the
// revival brings it back 250 ms after the other's. Which replica each one hits is the one the
// request reached in a run with the failures before it, which is the same run up to there.
func simulateScript(t *testing.T, newPolicy func() router.Policy, ws []workloads.Request, s routertest.LifecycleScript) ([]routertest.Call, []router.EndpointState) {
	t.Helper()
	var fails []cluster.Failure
	for k := range ws {
		switch {
		case s.Reset[k]:
			_, ends, _ := simulateOnce(t, newPolicy(), ws, fails)
			at := ws[k].Arrival + time.Nanosecond
			fails = append(fails, cluster.Failure{Replica: replicaIndex(t, ends[k]), At: at, RecoverAt: at + time.Nanosecond})
		case k == s.Kill:
			_, ends, _ := simulateOnce(t, newPolicy(), ws, fails)
			fails = append(fails, cluster.Failure{Replica: replicaIndex(t, ends[k]),
				At: ws[k].Arrival + 250*time.Millisecond, RecoverAt: ws[s.Revive].Arrival + 250*time.Millisecond})
		}
	}
	calls, _, eps := simulateOnce(t, newPolicy(), ws, fails)
	return calls, eps
}

// simulateOnce simulates ws with fails, the policy wrapped in a recorder. It returns the
// recorded calls, the endpoint each request ended on, and the routers' initial view.
func simulateOnce(t *testing.T, p router.Policy, ws []workloads.Request, fails []cluster.Failure) ([]routertest.Call, []string, []router.EndpointState) {
	t.Helper()
	stream := lifecycleStream(t)
	defer stream.Close()
	rec := routertest.NewRecorder(p)
	replicas := make([]engine.Config, lifecycleReplicas)
	for i := range replicas {
		replicas[i] = engine.Config{Deployment: lifecycleDeployment()}
	}
	ends := map[string]string{}
	c, err := cluster.New(cluster.Config{Replicas: replicas, Model: model, MetricsInterval: cluster.DefaultMetricsInterval,
		MaxRetries: lifecycleMaxRetries, Failures: fails}, rec, stream, cluster.Sink{Record: func(r *results.Record) {
		if r.Status != results.StatusCompleted {
			t.Errorf("%s: %s (%s)", r.ID, r.Status, r.Error)
		}
		ends[r.ID] = r.Endpoint
	}})
	if err != nil {
		t.Fatal(err)
	}
	eps := c.Endpoints()
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = ends[w.ID]
	}
	return rec.Calls(), out, eps
}

func replicaIndex(t *testing.T, id string) int {
	t.Helper()
	i, err := strconv.Atoi(strings.TrimPrefix(id, "replica-"))
	if err != nil || cluster.EndpointID(i) != id {
		t.Fatalf("endpoint %q is not a replica id", id)
	}
	return i
}
