package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"kvroute/internal/kvevents"
)

// subscribeSettle is the pause between the dials and the snapshot's fetch: a publisher
// applies a subscription a moment after the dial returns, and a message it sends before is
// lost to this router (a gap that replay fills, or that marks the backend stale).
const subscribeSettle = 100 * time.Millisecond

// KVBootstrap is how loading a peer router's index snapshot at start went.
type KVBootstrap struct {
	// Peer is the admin URL the snapshot came from; "" when none answered.
	Peer string
	// Backends and Blocks count what was loaded (backends this router also has).
	Backends, Blocks int
	// Took is the time from the start of the first fetch to the end of the load.
	Took time.Duration
	// Err joins the failures of the peers tried; nil when a snapshot was loaded.
	Err error
}

// newKVIndex builds the index and the subscriber that feeds it. The index exists even
// without kv_events, so that a reload can add sources; its metrics are registered once some
// are configured.
func (g *Gateway) newKVIndex(cfg KVEventsConfig) error {
	ic := kvevents.DefaultIndexConfig()
	if cfg.BlockSize > 0 {
		ic.BlockSize = cfg.BlockSize
	}
	g.kvBlockSize = ic.BlockSize
	g.kvIndex = kvevents.NewIndex(ic, kvevents.DefaultLimits(), kvSink{g})
	g.kvSub = &kvevents.Subscriber{Index: g.kvIndex, Resolve: g.resolve,
		OnError: func(error) { g.metrics.kvErrors.Inc() }}
	if !cfg.Enabled() {
		return nil
	}
	return g.registerKVMetrics()
}

// bootstrap loads the first snapshot a peer serves, then releases the messages the index
// held back. It waits first for its dialed sources to subscribe (at most 2 s), so that no
// message falls between a peer's snapshot and this router's stream: the snapshot ends at or
// after the first message held back. Without a snapshot the router starts from the events
// alone, and a backend whose first message shows history it missed is marked stale.
func (g *Gateway) bootstrap(ctx context.Context, cfg KVEventsConfig, dialed []chan struct{}) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, min(cfg.BootstrapTimeout, 2*time.Second))
	for _, d := range dialed {
		select {
		case <-d:
		case <-wctx.Done():
		}
	}
	cancel()
	// A publisher takes the subscription a moment after the dial returns.
	select {
	case <-time.After(subscribeSettle):
	case <-ctx.Done():
	}
	res := KVBootstrap{}
	var errs []error
	for _, peer := range cfg.BootstrapFrom {
		snap, err := g.fetchSnapshot(ctx, peer, cfg.BootstrapTimeout)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", peer, err))
			continue
		}
		snap = g.mapSnapshot(snap)
		res = KVBootstrap{Peer: peer, Backends: len(snap.Endpoints), Blocks: g.kvIndex.Load(snap)}
		errs = nil
		break
	}
	g.kvIndex.Release()
	res.Took, res.Err = time.Since(start), errors.Join(errs...)
	if res.Err != nil {
		res.Err = fmt.Errorf("gateway: kv_events.bootstrap_from: no peer served a snapshot: %w", res.Err)
		g.metrics.kvErrors.Inc()
	}
	g.mu.Lock()
	g.kvBoot = res
	g.mu.Unlock()
	if g.opts.OnKVBootstrap != nil {
		g.opts.OnKVBootstrap(res)
	}
}

// fetchSnapshot reads GET peer/kv/snapshot.
func (g *Gateway) fetchSnapshot(ctx context.Context, peer string, timeout time.Duration) (kvevents.Snapshot, error) {
	var snap kvevents.Snapshot
	lim := kvevents.DefaultSnapshotLimits()
	// ReadSnapshot bounds what it accepts by lim.
	err := g.get(ctx, strings.TrimSuffix(peer, "/")+"/kv/snapshot", timeout, math.MaxInt64, func(r io.Reader) error {
		var err error
		snap, err = kvevents.ReadSnapshot(r, lim)
		return err
	})
	return snap, err
}

// mapSnapshot renames a peer's replicas to this router's backend names, by URL first (the
// peer may name them otherwise), then by name; replicas this router does not have are left
// out.
func (g *Gateway) mapSnapshot(s kvevents.Snapshot) kvevents.Snapshot {
	st := g.current.Load()
	var out kvevents.Snapshot
	for _, e := range s.Endpoints {
		id, ok := "", false
		if e.URL != "" {
			id, ok = st.resolve(e.URL)
		}
		if !ok {
			id, ok = st.resolve(e.ID)
		}
		if ok {
			e.ID = id
			out.Endpoints = append(out.Endpoints, e)
		}
	}
	return out
}

// serveSnapshot writes the index's snapshot (kvevents.Snapshot.WriteTo), each replica with
// its backend's URL. While this router is itself bootstrapping it answers 503, so that a
// peer tries the next one rather than load a partial index.
func (g *Gateway) serveSnapshot(w http.ResponseWriter) {
	if g.kvIndex.Holding() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "kv index bootstrapping"})
		return
	}
	snap := g.kvIndex.Snapshot()
	st := g.current.Load()
	for i, e := range snap.Endpoints {
		for _, b := range st.backends {
			if b.name == e.ID {
				snap.Endpoints[i].URL = b.url
			}
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = snap.WriteTo(w)
}

// kvEjected tells the index that b's entries left the policy (the lifecycle reports an
// ejected backend as removed): its next event restores them, or clears them if the replica
// restarted. Gateway.mu is held.
func (g *Gateway) kvEjected(b *backend) { g.kvIndex.Suspend(b.name) }
