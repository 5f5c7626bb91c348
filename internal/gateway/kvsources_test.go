package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/kvevents"
	"kvroute/internal/nettest"
	"kvroute/router"
)

// kvPolicy routes to the first ready backend and keeps, per backend, the router keys its KV
// events report, forgetting a backend the lifecycle removes or ejects (as precise-prefix
// does): what a policy reading the caches would route on.
type kvPolicy struct {
	mu   sync.Mutex
	held map[string]map[uint64]bool
}

func (p *kvPolicy) Name() string { return "kv-spy" }
func (p *kvPolicy) Pick(req *router.Request, s *router.Snapshot) (router.Decision, error) {
	return firstReady{}.Pick(req, s)
}
func (p *kvPolicy) BlockStored(ep string, h uint64, _ string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[ep] == nil {
		p.held[ep] = map[uint64]bool{}
	}
	p.held[ep][h] = true
}
func (p *kvPolicy) BlockRemoved(ep string, h uint64, _ string) {
	p.mu.Lock()
	delete(p.held[ep], h)
	p.mu.Unlock()
}
func (p *kvPolicy) AllBlocksCleared(ep string)                                 { p.mu.Lock(); delete(p.held, ep); p.mu.Unlock() }
func (p *kvPolicy) Removed(ep string)                                          { p.AllBlocksCleared(ep) }
func (p *kvPolicy) Routed(*router.Request, router.Decision, string, time.Time) {}
func (p *kvPolicy) Finished(*router.Request, string, router.Usage, time.Time)  {}

// blocks returns how many blocks the policy believes ep holds.
func (p *kvPolicy) blocks(ep string) int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.held[ep]) }

// kvHarness is a gateway running the kv-spy policy over fakes, each with a KV-event
// publisher the gateway may dial.
type kvHarness struct {
	g      *Gateway
	reg    *prometheus.Registry
	pol    []*kvPolicy // every kv-spy policy built, the one in force last
	mu     sync.Mutex
	fakes  []*fake
	pubs   map[string]*kvevents.Publisher // by backend name
	addrs  map[string]string              // publisher endpoints by backend name
	replay map[string]string              // replay endpoints by backend name
	sent   map[string]uint64              // messages published by backend name
}

func (h *kvHarness) policy() *kvPolicy { h.mu.Lock(); defer h.mu.Unlock(); return h.pol[len(h.pol)-1] }

func newKVHarness(t *testing.T, names ...string) *kvHarness {
	t.Helper()
	h := &kvHarness{reg: prometheus.NewRegistry(), pubs: map[string]*kvevents.Publisher{}, addrs: map[string]string{}, replay: map[string]string{}, sent: map[string]uint64{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, n := range names {
		h.fakes = append(h.fakes, newFake(t, n))
		h.addrs[n], h.replay[n] = "tcp://"+nettest.FreeAddr(t), "tcp://"+nettest.FreeAddr(t)
		h.pubs[n] = h.publisher(ctx, t, n)
	}
	return h
}

// publisher binds name's publisher and replay endpoints; it closes when the test ends.
func (h *kvHarness) publisher(ctx context.Context, t *testing.T, name string) *kvevents.Publisher {
	t.Helper()
	p, err := kvevents.NewPublisher(ctx, kvevents.PublisherConfig{Endpoint: h.addrs[name], Bind: true,
		Topic: kvevents.Topic(name, fakeModel), Replay: h.replay[name], Buffer: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// config is a kv-spy configuration over the named fakes, each dialed for its events.
func (h *kvHarness) config(names ...string) Config {
	cfg := testConfig("kv-spy")
	for _, f := range h.fakes {
		if slices.Contains(names, f.name) {
			cfg.Backends = append(cfg.Backends, f.name+"="+f.url())
			cfg.KVEvents.Connect = append(cfg.KVEvents.Connect, f.name+"="+h.addrs[f.name])
			cfg.KVEvents.Replay = append(cfg.KVEvents.Replay, f.name+"="+h.replay[f.name])
		}
	}
	return cfg
}

func (h *kvHarness) registry() *router.Registry {
	reg := router.Builtin()
	_ = reg.Register("kv-spy", func(map[string]any, *rand.Rand) (router.Policy, error) {
		p := &kvPolicy{held: map[string]map[uint64]bool{}}
		h.mu.Lock()
		h.pol = append(h.pol, p)
		h.mu.Unlock()
		return p, nil
	})
	return reg
}

// start runs a gateway for cfg until the test ends.
func (h *kvHarness) start(t *testing.T, cfg Config) { t.Helper(); h.startOpts(t, cfg, Options{}) }

// startOpts is start with opts, whose metrics registry and policies the harness sets.
func (h *kvHarness) startOpts(t *testing.T, cfg Config, opts Options) {
	t.Helper()
	opts.Metrics, opts.Policies = h.reg, h.registry()
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.g = g
	ctx, cancel := context.WithCancel(context.Background())
	g.Probe(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
}

// publishUntil publishes n blocks of tokens [from, from+16·n) on name's stream until the
// policy holds want blocks of name (a subscription comes up a little after the dial: ZMQ's
// slow joiner).
func (h *kvHarness) publishUntil(t *testing.T, name string, from, n, want int) {
	t.Helper()
	nettest.WaitFor(t, fmt.Sprintf("%d blocks of %s", want, name), func() bool {
		h.publish(name, storedPayload(from, n))
		return h.policy().blocks(name) >= want
	})
}

func (h *kvHarness) publish(name string, payload []byte) {
	if h.pubs[name].Publish(payload) == nil {
		h.sent[name]++
	}
}

// applied reports whether the gateway applied every message published on name's stream.
func (h *kvHarness) applied(name string) bool {
	for _, e := range h.g.kvIndex.Snapshot().Endpoints {
		if e.ID == name {
			return e.Seq+1 == h.sent[name]
		}
	}
	return false
}

func storedPayload(from, n int) []byte {
	toks := make([]int32, 16*n)
	hashes := make([]uint64, n)
	for i := range toks {
		toks[i] = int32(from + i)
	}
	for i := range hashes {
		hashes[i] = uint64(from + i + 1)
	}
	return kvevents.Encode(kvevents.Batch{TS: 1, DPRank: -1, Events: []kvevents.Event{
		{Kind: kvevents.BlockStored, Hashes: hashes, Tokens: toks, BlockSize: 16}}}, kvevents.Named)
}

// A reload applies kv_events: a backend added with its publisher is subscribed, a removed
// one is unsubscribed and its index entries dropped.
func TestReloadAppliesKVEvents(t *testing.T) {
	h := newKVHarness(t, "a", "b")
	h.start(t, h.config("a"))
	h.publishUntil(t, "a", 0, 2, 2)
	if err := h.g.Reload(h.config("a", "b")); err != nil {
		t.Fatal(err)
	}
	h.publishUntil(t, "b", 100, 3, 3) // times out when the new source is ignored
	if err := h.g.Reload(h.config("b")); err != nil {
		t.Fatal(err)
	}
	if got := h.g.kvIndex.Keys("a"); got != 0 {
		t.Errorf("index keeps %d blocks of the removed backend", got)
	}
	// a's publisher goes on; b's next message, sent after, is a marker that a's would
	// have arrived by then had a still been subscribed.
	_ = h.pubs["a"].Publish(storedPayload(200, 1))
	h.publishUntil(t, "b", 300, 4, 7)
	if got := h.g.kvIndex.Keys("a") + h.policy().blocks("a"); got != 0 {
		t.Errorf("the removed backend is still subscribed: %d blocks after its reload", got)
	}
}

// A reload that builds a new policy gives it the caches the index already holds.
func TestReloadGivesTheNewPolicyTheIndex(t *testing.T) {
	h := newKVHarness(t, "a")
	cfg := h.config("a")
	h.start(t, cfg)
	h.publishUntil(t, "a", 0, 3, 3)
	cfg.PolicyParams = map[string]any{"any": 1} // a new instance
	if err := h.g.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if n := len(h.pol); n != 2 {
		t.Fatalf("%d policies built, want 2", n)
	}
	if got := h.policy().blocks("a"); got != 3 {
		t.Errorf("the new policy holds %d blocks of a, want 3", got)
	}
}

// A backend ejected and re-admitted whose event stream goes on kept its cache: its blocks
// come back to the policy (which forgot them at the ejection); one that restarted (its
// sequence numbers start again) comes back clean.
func TestReadmittedBackendKeepsOrDropsItsIndex(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			h := newKVHarness(t, "a")
			h.start(t, h.config("a"))
			h.publishUntil(t, "a", 0, 3, 3)
			// Many more messages, so that the restarted publisher's first message received
			// is numbered below the last one applied, whatever the reconnection loses.
			for range 2000 {
				h.publish("a", kvevents.Encode(kvevents.Batch{TS: 1, DPRank: -1}, kvevents.Named))
			}
			nettest.WaitFor(t, "the empty batches", func() bool { return h.applied("a") })
			f := h.fakes[0]
			f.kill()
			nettest.WaitFor(t, "the ejection", func() bool { return !h.g.Backends()[0].Ready })
			if got := h.policy().blocks("a"); got != 0 {
				t.Fatalf("the policy holds %d blocks of an ejected backend", got)
			}
			f.revive()
			nettest.WaitFor(t, "the re-admission", func() bool { return h.g.Backends()[0].Ready })
			if restart {
				h.pubs["a"].Close()
				h.pubs["a"], h.sent["a"] = h.publisher(context.Background(), t, "a"), 0 // numbers from 0 again
			}
			want := 4 // the three blocks it kept, and the new one
			if restart {
				want = 1
			}
			h.publishUntil(t, "a", 1000, 1, want)
			if got, keys := h.policy().blocks("a"), h.g.kvIndex.Keys("a"); got != want || keys != want {
				t.Errorf("policy holds %d blocks, index %d; want %d", got, keys, want)
			}
		})
	}
}

// A busy bind address is an error at start (and the reload that asks for one fails, keeping
// the running sources).
func TestKVBindBusy(t *testing.T) {
	h := newKVHarness(t, "a")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := h.config("a")
	cfg.KVEvents.Bind = "tcp://" + busy.Addr().String()
	g, err := New(cfg, Options{Policies: h.registry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- g.Run(ctx) }()
	select {
	case err := <-ran:
		if err == nil {
			t.Fatal("Run with a busy bind address: nil")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run with a busy bind address runs on")
	}
	h.start(t, h.config("a"))
	h.publishUntil(t, "a", 0, 1, 1) // running
	if err := h.g.Reload(cfg); err == nil {
		t.Fatal("Reload to a busy bind address: no error")
	}
	h.publishUntil(t, "a", 100, 1, 2) // the running source still runs
}
