package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/kvevents"
	"kvroute/router"
)

// KVEventsConfig feeds policies that read the replicas' caches (precise-prefix) from the
// replicas' vLLM KV events (internal/kvevents).
type KVEventsConfig struct {
	// Connect lists publishers to dial, one per replica: "NAME=tcp://host:5557", NAME being
	// a backend's name or URL (vLLM's --kv-events-config endpoint "tcp://*:5557"; llm-d's
	// pod-discovery mode). A bare "tcp://host:port" takes the backend from each message's
	// topic, kv@<pod>@<model>, whose pod is a backend's name or its URL's host:port.
	Connect []string `yaml:"connect" json:"connect"`
	// Replay lists replay ROUTER endpoints, "NAME=tcp://host:port", used to fill sequence
	// gaps of that backend's Connect stream (vLLM's replay_endpoint). Without one a gap marks
	// the backend's index stale (kvroute_gateway_kv_index_stale).
	Replay []string `yaml:"replay" json:"replay"`
	// Bind is one endpoint to listen on that every replica dials (llm-d's centralized mode,
	// llm-d-inference-sim's --zmq-endpoint); the backend comes from each topic's pod.
	Bind string `yaml:"bind" json:"bind"`
	// BlockSize is the engines' KV block size in tokens (16, vLLM's default --block-size).
	BlockSize int `yaml:"block_size" json:"block_size"`
}

// Enabled reports whether any KV event source is configured.
func (c KVEventsConfig) Enabled() bool { return len(c.Connect) > 0 || c.Bind != "" }

func (c KVEventsConfig) validate(backends []backendSpec) error {
	var errs []error
	find := func(name string) bool {
		for _, b := range backends {
			if b.name == name || b.url == name {
				return true
			}
		}
		return false
	}
	check := func(field string, i int, s string, named bool) {
		name, ep, ok := cutNamed(s)
		switch {
		case !strings.HasPrefix(ep, "tcp://") && !strings.HasPrefix(ep, "ipc://"):
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: endpoint %q: want tcp://host:port", field, i, ep))
		case named && !ok:
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: %q: want NAME=tcp://host:port", field, i, s))
		case ok && !find(name):
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: %q is not a backend's name or URL", field, i, name))
		}
	}
	for i, s := range c.Connect {
		check("connect", i, s, false)
	}
	for i, s := range c.Replay {
		check("replay", i, s, true)
	}
	if c.Bind != "" && !strings.HasPrefix(c.Bind, "tcp://") && !strings.HasPrefix(c.Bind, "ipc://") {
		errs = append(errs, fmt.Errorf("kv_events.bind %q: want tcp://host:port", c.Bind))
	}
	if c.Enabled() && c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("kv_events.block_size %d: want > 0", c.BlockSize))
	}
	return errors.Join(errs...)
}

// cutNamed splits "NAME=tcp://..." (NAME may be a URL, which holds no '=' before "tcp://").
func cutNamed(s string) (name, endpoint string, ok bool) {
	i := strings.LastIndex(s, "=tcp://")
	if i < 0 {
		i = strings.LastIndex(s, "=ipc://")
	}
	if i < 0 {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

// kvSink hands the index's router-keyed events to the policy in force, when it reads caches.
type kvSink struct{ g *Gateway }

func (k kvSink) observer() router.KVEventObserver {
	o, _ := k.g.current.Load().policy.(router.KVEventObserver)
	return o
}

func (k kvSink) BlockStored(ep string, h uint64) {
	if o := k.observer(); o != nil {
		o.BlockStored(ep, h)
	}
}

func (k kvSink) BlockRemoved(ep string, h uint64) {
	if o := k.observer(); o != nil {
		o.BlockRemoved(ep, h)
	}
}

func (k kvSink) AllBlocksCleared(ep string) {
	if o := k.observer(); o != nil {
		o.AllBlocksCleared(ep)
	}
}

// resolve maps a topic's pod, or a configured name or URL, to a backend's name: its
// endpoint ID.
func (g *Gateway) resolve(pod string) (string, bool) {
	for _, b := range g.current.Load().backends {
		if b.name == pod || b.url == pod {
			return b.name, true
		}
		if u, err := url.Parse(b.url); err == nil && u.Host == pod {
			return b.name, true
		}
	}
	return "", false
}

// runKVEvents subscribes to every configured source until ctx is done.
func (g *Gateway) runKVEvents(ctx context.Context, cfg KVEventsConfig) {
	sub := &kvevents.Subscriber{Index: g.kvIndex, Resolve: g.resolve,
		OnError: func(error) { g.metrics.kvErrors.Inc() }}
	replay := map[string]string{}
	for _, s := range cfg.Replay {
		name, ep, _ := cutNamed(s)
		if id, ok := g.resolve(name); ok {
			replay[id] = ep
		}
	}
	var srcs []kvevents.Source
	for _, s := range cfg.Connect {
		name, ep, named := cutNamed(s)
		src := kvevents.Source{Endpoint: ep}
		if named {
			src.ID, _ = g.resolve(name)
			src.Replay = replay[src.ID]
		}
		srcs = append(srcs, src)
	}
	if cfg.Bind != "" {
		srcs = append(srcs, kvevents.Source{Endpoint: cfg.Bind, Bind: true})
	}
	for _, src := range srcs {
		g.loops.Add(1)
		go func() {
			defer g.loops.Done()
			if err := sub.Run(ctx, src); err != nil {
				g.metrics.kvErrors.Inc()
				if g.opts.OnKVError != nil {
					g.opts.OnKVError(err)
				}
			}
		}()
	}
}

// registerKVMetrics exports the index's counters and each backend's staleness.
func (g *Gateway) registerKVMetrics(reg prometheus.Registerer) error {
	stat := func(name, help string, f func(kvevents.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvroute_gateway_kv_" + name, Help: help},
			func() float64 { return float64(f(g.kvIndex.Stats())) })
	}
	cs := []prometheus.Collector{
		stat("events_total", "KV events applied to the index.", func(s kvevents.Stats) uint64 { return s.Events }),
		stat("batches_dropped_total", "KV event messages dropped whole: undecodable, over a limit, or malformed frames.", func(s kvevents.Stats) uint64 { return s.Dropped }),
		stat("events_unknown_total", "KV events of unknown types, skipped.", func(s kvevents.Stats) uint64 { return s.Unknown }),
		stat("events_skipped_total", "KV events the index cannot use: another block size, an unseen parent, an offload tier, an unknown pod.", func(s kvevents.Stats) uint64 { return s.Skipped }),
		stat("gaps_total", "Sequence gaps in a replica's event stream.", func(s kvevents.Stats) uint64 { return s.Gaps }),
		stat("replayed_total", "Batches recovered from a replica's replay endpoint.", func(s kvevents.Stats) uint64 { return s.Replayed }),
		stat("restarts_total", "Replica restarts seen (sequence numbers going back); the replica's index starts clean.", func(s kvevents.Stats) uint64 { return s.Restarts }),
		staleCollector{g},
		g.metrics.kvErrors,
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// staleCollector exports kvroute_gateway_kv_index_stale{backend}: 1 while a backend's index
// has missed events it could not replay, until the backend restarts or clears its cache.
type staleCollector struct{ g *Gateway }

var (
	staleDesc = prometheus.NewDesc("kvroute_gateway_kv_index_stale",
		"1 when the backend's cache index missed KV events it could not replay (until it restarts or clears its cache), else 0.",
		[]string{"backend"}, nil)
	blocksDesc = prometheus.NewDesc("kvroute_gateway_kv_index_blocks",
		"Blocks the cache index holds for the backend: what its KV events say its GPU prefix cache holds.",
		[]string{"backend"}, nil)
)

func (c staleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- staleDesc; ch <- blocksDesc }

func (c staleCollector) Collect(ch chan<- prometheus.Metric) {
	stale := map[string]bool{}
	for _, id := range c.g.kvIndex.Stale() {
		stale[id] = true
	}
	for _, b := range c.g.current.Load().backends {
		v := 0.0
		if stale[b.name] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, v, b.name)
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(c.g.kvIndex.Keys(b.name)), b.name)
	}
}
