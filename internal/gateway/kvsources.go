package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"kvroute/internal/kvevents"
)

// kvKey names one running KV-event task: a Source read by the subscriber, or, when forward
// is set, a forwarder binding src.Endpoint and publishing on forward.
type kvKey struct {
	src     kvevents.Source
	forward string
}

func (k kvKey) String() string {
	if k.forward != "" {
		return "forward " + k.src.Endpoint + " → " + k.forward
	}
	if k.src.Bind {
		return "bind " + k.src.Endpoint
	}
	return "connect " + k.src.Endpoint
}

// kvTask is a running task; bound and fwd hold what was bound before it runs.
type kvTask struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	dialed chan struct{} // closed once a dialed source's first dial returned
	bound  *kvevents.Stream
	fwd    *kvevents.Forwarder
}

// kvRun is the KV-event tasks running, guarded by Gateway.mu.
type kvRun struct {
	ctx   context.Context // nil until StartKVEvents
	tasks map[kvKey]*kvTask
	// forwarded and fwdDropped carry the counts of forwarders already stopped.
	forwarded, fwdDropped uint64
}

// kvPlan lists the tasks cfg asks for, with backend names resolved against st.
func kvPlan(cfg KVEventsConfig, st *state) []kvKey {
	replay := map[string]string{}
	for _, s := range cfg.Replay {
		name, ep, _ := cutNamed(s)
		if id, ok := st.resolve(name); ok {
			replay[id] = ep
		}
	}
	var keys []kvKey
	for _, s := range cfg.Connect {
		name, ep, named := cutNamed(s)
		src := kvevents.Source{Endpoint: ep, Model: cfg.Model}
		if named {
			src.ID, _ = st.resolve(name)
			src.Replay = replay[src.ID]
		}
		keys = append(keys, kvKey{src: src})
	}
	switch {
	case cfg.Bind != "" && cfg.Forward != "":
		keys = append(keys, kvKey{src: kvevents.Source{Endpoint: cfg.Bind, Bind: true}, forward: cfg.Forward},
			kvKey{src: kvevents.Source{Endpoint: kvevents.DialAddr(cfg.Forward)}})
	case cfg.Bind != "":
		keys = append(keys, kvKey{src: kvevents.Source{Endpoint: cfg.Bind, Bind: true}})
	}
	return keys
}

// StartKVEvents binds the KV-event endpoints this router listens on (kv_events.bind and
// kv_events.forward), dials the publishers, and with kv_events.bootstrap_from loads a peer's
// snapshot before it applies any event. A busy address is an error, and nothing is left
// running. The tasks stop when ctx is done; Run waits for them. Run calls StartKVEvents when
// it was not called before.
func (g *Gateway) StartKVEvents(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.startKVEventsLocked(ctx)
}

func (g *Gateway) startKVEventsLocked(ctx context.Context) error {
	if g.kv.ctx != nil {
		return nil
	}
	st := g.current.Load()
	cfg := st.cfg.KVEvents
	if !cfg.Enabled() {
		g.kv.ctx = ctx
		return nil
	}
	want := kvPlan(cfg, st)
	opened, err := g.kvOpen(ctx, want)
	if err != nil {
		return err
	}
	g.kv.ctx = ctx
	if len(cfg.BootstrapFrom) > 0 {
		g.kvIndex.Hold() // before any subscription reads
		var dialed []chan struct{}
		for k, t := range opened {
			if !k.src.Bind && k.forward == "" {
				dialed = append(dialed, t.dialed)
			}
		}
		g.loops.Add(1)
		go func() {
			defer g.loops.Done()
			g.bootstrap(ctx, cfg, dialed)
		}()
	}
	g.kvStart(opened)
	return nil
}

// kvOpen prepares a task for each key, binding what binds; on an error it closes what it
// bound and returns the error.
func (g *Gateway) kvOpen(ctx context.Context, keys []kvKey) (map[kvKey]*kvTask, error) {
	out := map[kvKey]*kvTask{}
	for _, k := range keys {
		if _, dup := out[k]; dup {
			continue
		}
		tctx, cancel := context.WithCancel(ctx)
		t := &kvTask{ctx: tctx, cancel: cancel, done: make(chan struct{}), dialed: make(chan struct{})}
		var err error
		switch {
		case k.forward != "":
			t.fwd, err = kvevents.NewForwarder(tctx, kvevents.ForwarderConfig{Listen: k.src.Endpoint, Publish: k.forward})
			if err == nil {
				t.fwd.OnError = func(error) { g.metrics.kvErrors.Inc() }
			}
		case k.src.Bind:
			t.bound, err = g.kvSub.Listen(tctx, k.src)
		}
		if err != nil {
			cancel()
			g.kvClose(out)
			return nil, fmt.Errorf("gateway: kv_events: %s: %w", k, err)
		}
		out[k] = t
	}
	return out, nil
}

// kvClose closes tasks that were opened and never started.
func (g *Gateway) kvClose(tasks map[kvKey]*kvTask) {
	for _, t := range tasks {
		if t.fwd != nil {
			_ = t.fwd.Close()
		}
		if t.bound != nil {
			_ = t.bound.Close()
		}
		t.cancel()
	}
}

// kvStart runs opened tasks. Gateway.mu is held.
func (g *Gateway) kvStart(tasks map[kvKey]*kvTask) {
	if g.kv.tasks == nil {
		g.kv.tasks = map[kvKey]*kvTask{}
	}
	for k, t := range tasks {
		g.kv.tasks[k] = t
		g.loops.Add(1)
		go func() {
			defer g.loops.Done()
			defer close(t.done)
			switch {
			case t.fwd != nil:
				t.fwd.Run(t.ctx)
				_ = t.fwd.Close()
			case t.bound != nil:
				t.bound.Run(t.ctx)
			default: // a dialed source redials: it never fails for good
				st, err := g.kvSub.Dial(t.ctx, k.src)
				close(t.dialed)
				if err != nil {
					_ = g.kvSub.Run(t.ctx, k.src)
				} else {
					st.Run(t.ctx)
				}
			}
		}()
	}
}

// kvReload brings the running tasks to what st's configuration asks for: it stops the
// tasks no longer wanted, then opens the new ones. When a new endpoint cannot be bound it
// reopens what it stopped and returns the error, so the running configuration stays whole.
// Gateway.mu is held.
func (g *Gateway) kvReload(st *state) error {
	cfg := st.cfg.KVEvents
	if cfg.Enabled() && cfg.BlockSize != g.kvBlockSize {
		return fmt.Errorf("gateway: kv_events.block_size %d: the index keys %d-token blocks; changing it takes a restart", cfg.BlockSize, g.kvBlockSize)
	}
	if cfg.Enabled() {
		if err := g.registerKVMetrics(); err != nil {
			return err
		}
	}
	if g.kv.ctx == nil { // not started: StartKVEvents reads the configuration in force
		return nil
	}
	want := map[kvKey]bool{}
	for _, k := range kvPlan(cfg, st) {
		want[k] = true
	}
	var stop, add []kvKey
	for k := range g.kv.tasks {
		if !want[k] {
			stop = append(stop, k)
		}
	}
	for k := range want {
		if g.kv.tasks[k] == nil {
			add = append(add, k)
		}
	}
	stopped := g.kvStop(stop)
	opened, err := g.kvOpen(g.kv.ctx, add)
	if err != nil {
		if back, err2 := g.kvOpen(g.kv.ctx, stopped); err2 == nil {
			g.kvStart(back)
		} else {
			err = errors.Join(err, fmt.Errorf("gateway: kv_events: the running sources could not be restored: %w", err2))
		}
		return err
	}
	g.kvStart(opened)
	return nil
}

// kvStop stops the tasks of keys and waits for them (a bound endpoint is free again after),
// returning the keys it stopped, sorted. Gateway.mu is held; the tasks never take it.
func (g *Gateway) kvStop(keys []kvKey) []kvKey {
	slices.SortFunc(keys, func(a, b kvKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		t := g.kv.tasks[k]
		t.cancel()
		<-t.done
		if t.fwd != nil {
			g.kv.forwarded += t.fwd.Forwarded()
			g.kv.fwdDropped += t.fwd.Dropped()
		}
		delete(g.kv.tasks, k)
	}
	return keys
}

// kvForwardCounts returns the messages forwarded and dropped by every forwarder so far.
func (g *Gateway) kvForwardCounts() (forwarded, dropped uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	forwarded, dropped = g.kv.forwarded, g.kv.fwdDropped
	for _, t := range g.kv.tasks {
		if f := t.fwd; f != nil {
			forwarded += f.Forwarded()
			dropped += f.Dropped()
		}
	}
	return forwarded, dropped
}
