package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/gateway"
	"kvroute/internal/nettest"
	"kvroute/router"
	"kvroute/router/routertest"
	"kvroute/sim/cluster"
	"kvroute/workloads"
)

// liveScript is the router in front of emulated replicas that a conformance script runs on.
type liveScript struct {
	reps   []*recordingReplica
	gw     *gateway.Gateway
	url    string
	health chan healthEvent
	reset  atomic.Bool // the next completion a replica receives is reset before any answer
}

// runScriptLive runs the script through cmd/route's gateway over loopback HTTP in front of
// lifecycleReplicas emulated replicas named as the simulator names its replicas, the policy
// wrapped in a recorder, and returns the recorded calls. Each request is sent once the one
// before has ended and every replica's scrape shows it idle, as in the simulation; a reset
// attempt is a replica closing the connection unanswered; the kill and revival wait for the
// router's health checks to eject and re-admit the replica.
func runScriptLive(t *testing.T, newPolicy func() router.Policy, ws []workloads.Request, s routertest.LifecycleScript) []routertest.Call {
	t.Helper()
	rec := routertest.NewRecorder(newPolicy())
	ls := startLiveScript(t, rec)
	killed := -1
	for k := range ws {
		ls.reset.Store(s.Reset[k])
		endpoint := ls.send(t, &ws[k])
		if ls.reset.Load() {
			t.Fatalf("request %d: no replica saw the attempt to reset", k)
		}
		ls.waitIdle(t)
		switch k {
		case s.Kill:
			killed = replicaIndex(t, endpoint)
			ls.reps[killed].kill()
			ls.waitHealth(t, killed, false)
		case s.Revive:
			ls.reps[killed].revive(t)
			ls.waitHealth(t, killed, true)
			ls.waitIdle(t)
		}
	}
	return rec.Calls()
}

func startLiveScript(t *testing.T, p router.Policy) *liveScript {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ls := &liveScript{health: make(chan healthEvent, 64)}
	pp, err := gpumodel.NewPrefillPredictor(lifecycleDeployment())
	if err != nil {
		t.Fatal(err)
	}
	ls.reps = startRecording(t, ctx, lifecycleReplicas, 10)
	for _, rr := range ls.reps {
		rr.reset = &ls.reset
	}
	reg := router.Builtin()
	if err := reg.Register("conformance", func(map[string]any, *rand.Rand) (router.Policy, error) { return p, nil }); err != nil {
		t.Fatal(err)
	}
	ls.gw, ls.url = startRouter(t, ctx, ls.reps, func(c *gateway.Config) {
		c.Policy, c.DebugHeaders, c.Limits.MaxRetries = "conformance", true, lifecycleMaxRetries
		c.Health.MetricsInterval, c.Health.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
		c.Prefill = map[string]router.PrefillPredictor{}
		for i := range ls.reps {
			c.Prefill[cluster.EndpointID(i)] = pp
		}
	}, gateway.Options{Policies: reg, OnHealth: func(name, _ string, ready bool, _ error) {
		select {
		case ls.health <- healthEvent{name, ready}:
		default:
		}
	}})
	ls.waitIdle(t)
	return ls
}

// send posts w as the client of a simulated request would: its messages as a chat
// completion, or its text as a completion, with max_tokens (the body the simulator's chwbl
// renders), and returns the endpoint that answered it.
func (ls *liveScript) send(t *testing.T, w *workloads.Request) string {
	t.Helper()
	path, body := "/v1/completions", []byte(nil)
	if len(w.Messages) > 0 {
		type message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		msgs := make([]message, len(w.Messages))
		for i, m := range w.Messages {
			msgs[i] = message{string(m.Role), m.Content}
		}
		path = "/v1/chat/completions"
		body, _ = json.Marshal(struct {
			Model     string    `json:"model"`
			Messages  []message `json:"messages"`
			MaxTokens int       `json:"max_tokens"`
		}{model, msgs, w.OutputTokens})
	} else {
		body, _ = json.Marshal(struct {
			Model     string `json:"model"`
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}{model, w.Text, w.OutputTokens})
	}
	resp, err := http.Post(ls.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s", w.ID, resp.StatusCode, b)
	}
	return resp.Header.Get("X-Kvroute-Endpoint")
}

// waitIdle waits until the router has released every request and has scraped every ready
// replica idle since then.
func (ls *liveScript) waitIdle(t *testing.T) {
	t.Helper()
	since := time.Now()
	nettest.WaitFor(t, "an idle fleet", func() bool {
		if ls.gw.InFlight() != 0 {
			since = time.Now()
			return false
		}
		for _, b := range ls.gw.Backends() {
			if b.Ready && (b.UpdatedAt.Before(since) || b.Running+b.Waiting > 0 || b.KVUsage > 0) {
				return false
			}
		}
		return true
	})
}

// waitHealth waits until the router marks replica i ready or ejected.
func (ls *liveScript) waitHealth(t *testing.T, i int, ready bool) {
	t.Helper()
	name := cluster.EndpointID(i)
	timeout := time.After(20 * time.Second)
	for {
		for _, b := range ls.gw.Backends() {
			if b.Name == name && b.Ready == ready {
				return
			}
		}
		select {
		case <-ls.health:
		case <-timeout:
			t.Fatalf("%s never became ready=%v", name, ready)
		}
	}
}
