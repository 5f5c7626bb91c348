package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"kvroute/router"
)

// KVEventsConfig feeds policies that read the replicas' caches (precise-prefix) from the
// replicas' vLLM KV events (internal/kvevents). A reload applies every field but BlockSize:
// new sources are subscribed, removed ones stopped, a removed backend's index dropped.
type KVEventsConfig struct {
	// Connect lists publishers to dial, one per replica: "NAME=tcp://host:5557", NAME being
	// a backend's name or URL (vLLM's --kv-events-config endpoint "tcp://*:5557"; llm-d's
	// pod-discovery mode). A bare "tcp://host:port" takes the backend from each message's
	// topic, kv@<pod>@<model>, whose pod is a backend's name or its URL's host:port: the
	// form that dials another router's Forward endpoint.
	Connect []string `yaml:"connect" json:"connect"`
	// Replay lists replay ROUTER endpoints, "NAME=tcp://host:port", used to fill sequence
	// gaps of the stream of a Connect entry of the same NAME (vLLM's replay_endpoint).
	// Without one a gap marks the backend's index stale (kvroute_gateway_kv_index_stale).
	Replay []string `yaml:"replay" json:"replay"`
	// Bind is one endpoint to listen on that every replica dials (llm-d's centralized mode,
	// llm-d-inference-sim's --zmq-endpoint); the backend comes from each topic's pod. Only
	// one process can bind it: a busy address is an error at start and at reload.
	Bind string `yaml:"bind" json:"bind"`
	// Forward, with Bind, is a PUB endpoint ("tcp://0.0.0.0:5600") on which this router
	// re-publishes every message received on Bind unchanged, for other routers to dial as
	// a bare Connect entry; this router reads it too. One router binds, any number follow.
	Forward string `yaml:"forward" json:"forward"`
	// BootstrapFrom lists peer routers' admin addresses ("http://router-0:9090"). At start
	// the router holds its subscriptions' messages back, loads the first peer's GET
	// /kv/snapshot that answers (every backend's blocks and last sequence number), then
	// applies the messages numbered after it; /ready answers 503 meanwhile.
	BootstrapFrom []string `yaml:"bootstrap_from" json:"bootstrap_from"`
	// BootstrapTimeout bounds fetching one peer's snapshot (5s).
	BootstrapTimeout time.Duration `yaml:"bootstrap_timeout" json:"bootstrap_timeout"`
	// BlockSize is the engines' KV block size in tokens (16, vLLM's default --block-size).
	BlockSize int `yaml:"block_size" json:"block_size"`
	// Model is the served model name (the one clients send) that salts the block keys of a
	// named publisher's messages whose topic names no model: vLLM's default topic is empty.
	// Empty: such messages are keyed under an empty model name, which no request matches.
	Model string `yaml:"model" json:"model"`
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
		case !zmqEndpoint(ep):
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: endpoint %q: want tcp://host:port", field, i, ep))
		case named && !ok:
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: %q: want NAME=tcp://host:port", field, i, s))
		case ok && !find(name):
			errs = append(errs, fmt.Errorf("kv_events.%s[%d]: %q is not a backend's name or URL", field, i, name))
		}
	}
	dialed := map[string]bool{}
	for i, s := range c.Connect {
		check("connect", i, s, false)
		if name, _, ok := cutNamed(s); ok {
			dialed[name] = true
		}
	}
	for i, s := range c.Replay {
		check("replay", i, s, true)
		if name, _, ok := cutNamed(s); ok && find(name) && !dialed[name] {
			errs = append(errs, fmt.Errorf("kv_events.replay[%d]: %q has no kv_events.connect entry %s=tcp://...: "+
				"replay fills the gaps of a stream this router dials by name (a stream on kv_events.bind, or dialed bare, "+
				"comes from replicas that dial in or through a forwarder; its gaps mark the backend stale)", i, name, name))
		}
	}
	for _, f := range [][2]string{{"bind", c.Bind}, {"forward", c.Forward}} {
		if f[1] != "" && !zmqEndpoint(f[1]) {
			errs = append(errs, fmt.Errorf("kv_events.%s %q: want tcp://host:port", f[0], f[1]))
		}
	}
	if c.Forward != "" && c.Bind == "" {
		errs = append(errs, fmt.Errorf("kv_events.forward %q: re-publishes what kv_events.bind receives: set bind too", c.Forward))
	}
	if c.Forward != "" && c.Forward == c.Bind {
		errs = append(errs, fmt.Errorf("kv_events.forward %q: want an endpoint other than bind", c.Forward))
	}
	for i, p := range c.BootstrapFrom {
		if u, err := url.Parse(p); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("kv_events.bootstrap_from[%d] %q: want a peer router's admin URL, http://host:port", i, p))
		}
	}
	if len(c.BootstrapFrom) > 0 && c.BootstrapTimeout <= 0 {
		errs = append(errs, fmt.Errorf("kv_events.bootstrap_timeout %v: want > 0", c.BootstrapTimeout))
	}
	if c.Enabled() && c.BlockSize < 1 {
		errs = append(errs, fmt.Errorf("kv_events.block_size %d: want > 0", c.BlockSize))
	}
	return errors.Join(errs...)
}

func zmqEndpoint(ep string) bool {
	return strings.HasPrefix(ep, "tcp://") || strings.HasPrefix(ep, "ipc://")
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

// kvSink hands the index's router-keyed events to the policy in force, when it reads caches:
// in a P/D fleet, the policy of the endpoint's pool.
type kvSink struct{ g *Gateway }

func (k kvSink) observer(ep string) router.KVEventObserver {
	st := k.g.current.Load()
	p := st.policy
	if st.pd != nil {
		p = st.pd.policyOf(ep)
	}
	o, _ := p.(router.KVEventObserver)
	return o
}

func (k kvSink) BlockStored(ep string, h uint64, medium string) {
	if o := k.observer(ep); o != nil {
		o.BlockStored(ep, h, medium)
	}
}

func (k kvSink) BlocksStored(ep string, hs []uint64, parent uint64, hasParent bool, medium string) {
	if o := k.observer(ep); o != nil {
		router.StoreBlocks(o, ep, hs, parent, hasParent, medium)
	}
}

func (k kvSink) BlockRemoved(ep string, h uint64, medium string) {
	if o := k.observer(ep); o != nil {
		o.BlockRemoved(ep, h, medium)
	}
}

func (k kvSink) AllBlocksCleared(ep string) {
	if o := k.observer(ep); o != nil {
		o.AllBlocksCleared(ep)
	}
}

// resolve maps a topic's pod, or a configured name or URL, to the name (endpoint ID) of a
// backend in force.
func (g *Gateway) resolve(pod string) (string, bool) { return g.current.Load().resolve(pod) }

// resolve maps a topic's pod, or a configured name or URL, to the name of one of st's
// backends: by name, by URL, or by the URL's host:port (llm-d-inference-sim's POD_IP:port).
func (st *state) resolve(pod string) (string, bool) {
	for _, b := range st.backends {
		if b.name == pod || b.url == pod {
			return b.name, true
		}
		if u, err := url.Parse(b.url); err == nil && u.Host == pod {
			return b.name, true
		}
	}
	return "", false
}
