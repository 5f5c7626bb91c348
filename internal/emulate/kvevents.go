package emulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"kvroute/internal/kvevents"
	"kvroute/sim/engine"
)

// KVEventsConfig makes a replica publish its prefix cache's changes as vLLM does with
// --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", ...}'
// (vllm/distributed/kv_events.py ZmqEventPublisher): one KVEventBatch per engine loop
// turn, frames [topic, 8-byte big-endian seq, msgpack batch].
type KVEventsConfig struct {
	// Endpoint is the PUB address: bound when it holds '*' (tcp://*:5557, vLLM's default)
	// or Bind is set, dialed otherwise (a router that binds one endpoint for every replica).
	// Empty: off.
	Endpoint string `json:"endpoint" yaml:"endpoint"`
	Bind     bool   `json:"bind" yaml:"bind"`
	// ReplayEndpoint, when set, is bound as the ROUTER that serves missed batches.
	ReplayEndpoint string `json:"replay_endpoint" yaml:"replay_endpoint"`
	// Topic defaults to kv@<listen address>@<served model name>.
	Topic string `json:"topic" yaml:"topic"`
	// NamedFields publishes the named-field maps of vLLM PR #42892 instead of the
	// positional arrays.
	NamedFields bool `json:"named_fields" yaml:"named_fields"`
	// BufferSteps is how many batches the replay buffer keeps (vLLM's buffer_steps, 10,000).
	BufferSteps int `json:"buffer_steps" yaml:"buffer_steps"`
}

func (c KVEventsConfig) validate() error {
	var errs []error
	if c.Endpoint == "" && (c.ReplayEndpoint != "" || c.Topic != "") {
		errs = append(errs, errors.New("emulate: kv_events: replay_endpoint and topic need an endpoint"))
	}
	for _, ep := range []string{c.Endpoint, c.ReplayEndpoint} {
		if ep != "" && !strings.HasPrefix(ep, "tcp://") && !strings.HasPrefix(ep, "ipc://") {
			errs = append(errs, fmt.Errorf("emulate: kv_events: endpoint %q: want tcp://host:port or ipc://path", ep))
		}
	}
	if c.BufferSteps < 0 {
		errs = append(errs, fmt.Errorf("emulate: kv_events: buffer_steps must not be negative, got %d", c.BufferSteps))
	}
	return errors.Join(errs...)
}

// kvOut collects the engine's KV events during one loop turn and publishes them as one
// batch. Only the engine loop touches it.
type kvOut struct {
	pub       *kvevents.Publisher
	enc       kvevents.Encoding
	blockSize int
	events    []kvevents.Event
	now       func() float64 // the batch's ts: wall seconds
	errs      int64          // publish failures
}

// add appends one engine event, merging it into the previous event when vLLM would have
// reported both in one: consecutive stored blocks of one chain, consecutive removals of one
// medium, consecutive CPU stores (the offloading connector's take_events reports each
// completed store as one token-less BlockStored).
func (o *kvOut) add(ev engine.KVEvent) {
	var last *kvevents.Event
	if n := len(o.events); n > 0 {
		last = &o.events[n-1]
	}
	medium := ev.Medium.String()
	switch {
	case ev.Cleared:
		o.events = append(o.events, kvevents.Event{Kind: kvevents.AllBlocksCleared})
	case !ev.Stored:
		if last != nil && last.Kind == kvevents.BlockRemoved && last.Medium == medium {
			last.Hashes = append(last.Hashes, ev.Hash)
			return
		}
		o.events = append(o.events, kvevents.Event{Kind: kvevents.BlockRemoved, Hashes: []uint64{ev.Hash}, Medium: medium})
	case ev.Medium == engine.MediumCPU:
		if last != nil && last.Kind == kvevents.BlockStored && last.Medium == medium {
			last.Hashes = append(last.Hashes, ev.Hash)
			return
		}
		o.events = append(o.events, kvevents.Event{Kind: kvevents.BlockStored, Hashes: []uint64{ev.Hash},
			Tokens: []int32{}, BlockSize: ev.BlockSize, Medium: medium})
	case last != nil && last.Medium == "GPU" && last.Kind == kvevents.BlockStored && ev.HasParent && last.Hashes[len(last.Hashes)-1] == ev.Parent:
		last.Hashes = append(last.Hashes, ev.Hash)
		last.Tokens = append(last.Tokens, ev.Tokens...)
	default:
		o.events = append(o.events, kvevents.Event{Kind: kvevents.BlockStored, Hashes: []uint64{ev.Hash},
			Parent: ev.Parent, HasParent: ev.HasParent, Tokens: slices.Clone(ev.Tokens), BlockSize: o.blockSize, Medium: "GPU"})
	}
}

// flush publishes the events collected, if any.
func (o *kvOut) flush() {
	if len(o.events) == 0 {
		return
	}
	b := kvevents.Batch{TS: o.now(), Events: o.events, DPRank: 0}
	if err := o.pub.Publish(kvevents.Encode(b, o.enc)); err != nil {
		o.errs++
	}
	o.events = o.events[:0:0] // the encoded payload owns nothing of it; start afresh
}

// startKVEvents opens the publisher; r.mu is held and the replica listens already (the
// default topic names its address).
func (r *Replica) startKVEvents(ctx context.Context) error {
	kc := r.cfg.KVEvents
	topic := kc.Topic
	if topic == "" {
		topic = kvevents.Topic(r.addr, r.served)
	}
	buf := kc.BufferSteps
	if buf == 0 {
		buf = 10_000
	}
	pub, err := kvevents.NewPublisher(ctx, kvevents.PublisherConfig{Endpoint: kc.Endpoint, Bind: kc.Bind, Topic: topic, Replay: kc.ReplayEndpoint, Buffer: buf})
	if err != nil {
		return fmt.Errorf("emulate: %w", err)
	}
	r.core.kv.pub = pub
	return nil
}
