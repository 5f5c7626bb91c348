package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"kvroute/internal/kvevents"
)

// registerKVMetrics exports the index's counters, each backend's state and the bootstrap's,
// once: at New when kv_events is configured, or at the reload that configures it.
// Gateway.mu is held, or g is not yet shared.
func (g *Gateway) registerKVMetrics() error {
	if g.kvMetrics {
		return nil
	}
	stat := func(name, help string, f func(kvevents.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvroute_gateway_kv_" + name, Help: help},
			func() float64 { return float64(f(g.kvIndex.Stats())) })
	}
	boot := func(name, help string, f func(kvevents.BootStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvroute_gateway_kv_" + name, Help: help},
			func() float64 { return float64(f(g.kvIndex.BootStats())) })
	}
	fwd := func(name, help string, dropped bool) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kvroute_gateway_kv_" + name, Help: help},
			func() float64 {
				f, d := g.kvForwardCounts()
				if dropped {
					return float64(d)
				}
				return float64(f)
			})
	}
	cs := []prometheus.Collector{
		stat("events_total", "KV events applied to the index.", func(s kvevents.Stats) uint64 { return s.Events }),
		stat("batches_dropped_total", "KV event messages dropped whole: undecodable, over a limit, or malformed frames.", func(s kvevents.Stats) uint64 { return s.Dropped }),
		stat("events_unknown_total", "KV events of unknown types, skipped.", func(s kvevents.Stats) uint64 { return s.Unknown }),
		stat("events_skipped_total", "KV events the index cannot use: another block size, an unseen parent, a token-less store of unknown blocks.", func(s kvevents.Stats) uint64 { return s.Skipped }),
		stat("gaps_total", "Sequence gaps in a replica's event stream.", func(s kvevents.Stats) uint64 { return s.Gaps }),
		stat("replayed_total", "Batches recovered from a replica's replay endpoint.", func(s kvevents.Stats) uint64 { return s.Replayed }),
		stat("restarts_total", "Replica restarts seen (sequence numbers going back); the replica's index starts clean.", func(s kvevents.Stats) uint64 { return s.Restarts }),
		boot("duplicates_total", "KV event messages skipped because the peer snapshot loaded at start already held them.", func(s kvevents.BootStats) uint64 { return s.Duplicates }),
		boot("restored_total", "Backends whose blocks went back to the policy after a re-admission, their event stream showing they had not restarted.", func(s kvevents.BootStats) uint64 { return s.Restored }),
		fwd("forwarded_total", "KV event messages re-published on kv_events.forward.", false),
		fwd("forward_dropped_total", "KV event messages the forwarder dropped: malformed frames, over the payload limit, or over its queue.", true),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvroute_gateway_kv_bootstrapping",
			Help: "1 while the router loads a peer's index snapshot (kv_events.bootstrap_from) and holds its KV events back, else 0."},
			func() float64 { return b2f(g.kvIndex.Holding()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kvroute_gateway_kv_bootstrap_blocks",
			Help: "Blocks loaded from a peer's index snapshot at start; 0 when none was loaded."},
			func() float64 { g.mu.Lock(); defer g.mu.Unlock(); return float64(g.kvBoot.Blocks) }),
		kvBackendCollector{g},
		kvReasonCollector{g},
		g.metrics.kvErrors,
	}
	for _, c := range cs {
		if err := g.opts.Metrics.Register(c); err != nil {
			return fmt.Errorf("gateway: metrics: %w", err)
		}
	}
	g.kvMetrics = true
	return nil
}

// kvReasonCollector exports, by reason, the KV event messages dropped whole
// (kvroute_gateway_kv_messages_dropped_total{reason}: malformed, topic, undecodable,
// overflow) and the event connections the wire guard closed
// (kvroute_gateway_kv_connections_closed_total{reason}: frame_too_large, too_many_frames,
// message_too_large, protocol, conn_limit).
type kvReasonCollector struct{ g *Gateway }

var (
	kvDroppedDesc = prometheus.NewDesc("kvroute_gateway_kv_messages_dropped_total",
		"KV event messages dropped whole, by reason: malformed frames, a topic naming no configured backend, a payload that does not decode, a full queue.",
		[]string{"reason"}, nil)
	kvClosedDesc = prometheus.NewDesc("kvroute_gateway_kv_connections_closed_total",
		"KV event connections closed by the wire guard before the ZMQ library read past a bound, by reason.",
		[]string{"reason"}, nil)
)

func (c kvReasonCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- kvDroppedDesc
	ch <- kvClosedDesc
}

func (c kvReasonCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.g.kvIndex.Stats()
	for _, n := range st.DroppedBy() {
		ch <- prometheus.MustNewConstMetric(kvDroppedDesc, prometheus.CounterValue, float64(n.N), n.Reason)
	}
	for _, n := range st.ClosedBy() {
		ch <- prometheus.MustNewConstMetric(kvClosedDesc, prometheus.CounterValue, float64(n.N), n.Reason)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// kvBackendCollector exports each backend's index state: kvroute_gateway_kv_index_stale,
// _blocks and _behind_messages.
type kvBackendCollector struct{ g *Gateway }

var (
	staleDesc = prometheus.NewDesc("kvroute_gateway_kv_index_stale",
		"1 when the backend's cache index missed KV events it could not replay or load (a gap, or a late start without a snapshot), until it restarts or clears its cache, else 0.",
		[]string{"backend"}, nil)
	blocksDesc = prometheus.NewDesc("kvroute_gateway_kv_index_blocks",
		"Blocks the cache index holds for the backend, in any tier: what its KV events say its prefix cache and offload tiers hold.",
		[]string{"backend"}, nil)
	behindDesc = prometheus.NewDesc("kvroute_gateway_kv_index_behind_messages",
		"KV event messages of the backend the index lacked when its first one arrived: the history a late start missed (0 after a complete start or a peer snapshot with no gap).",
		[]string{"backend"}, nil)
)

func (c kvBackendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- staleDesc
	ch <- blocksDesc
	ch <- behindDesc
}

func (c kvBackendCollector) Collect(ch chan<- prometheus.Metric) {
	stale := map[string]bool{}
	for _, id := range c.g.kvIndex.Stale() {
		stale[id] = true
	}
	for _, b := range c.g.current.Load().backends {
		x := c.g.kvIndex
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.GaugeValue, b2f(stale[b.name]), b.name)
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(x.Keys(b.name)), b.name)
		ch <- prometheus.MustNewConstMetric(behindDesc, prometheus.GaugeValue, float64(x.Behind(b.name)), b.name)
	}
}
