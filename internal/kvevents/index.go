package kvevents

import (
	"fmt"
	"slices"
	"sync"

	"kvroute/router/prefix"
)

// Observer hears router-keyed cache changes; router.KVEventObserver has this shape, so a
// precise policy (router.PreciseScorer, router.Pipeline) plugs in directly. medium is the
// tier of the store or removal; the Index reports the GPU tier only (gpu).
type Observer interface {
	BlockStored(endpoint string, hash uint64, medium string)
	BlockRemoved(endpoint string, hash uint64, medium string)
	AllBlocksCleared(endpoint string)
}

// gpu is vLLM's medium for the GPU's KV cache (router.MediumGPU): the one tier the index
// forwards; events of other tiers are counted as skipped.
const gpu = "GPU"

// IndexConfig configures an Index.
type IndexConfig struct {
	// BlockSize is the router's block size in tokens; events of another block size are
	// counted and skipped (the router's keys would not line up with the engine's blocks).
	BlockSize int
	// MaxKeysPerEndpoint bounds the engine key → router key map of one replica; a replica
	// that exceeds it (more blocks than any GPU holds: hostile or broken) is cleared and
	// marked stale.
	MaxKeysPerEndpoint int
}

// DefaultIndexConfig: 16-token blocks (vLLM's default --block-size), 4M keys per replica
// (an H200 holds about 0.6M 16-token blocks of an 8B model).
func DefaultIndexConfig() IndexConfig { return IndexConfig{BlockSize: 16, MaxKeysPerEndpoint: 1 << 22} }

// Stats counts what an Index, and the Subscribers feeding it, have seen.
type Stats struct {
	Batches, Events, Stored, Removed, Cleared uint64
	// Dropped counts messages dropped whole: the sum of the Dropped* reasons.
	Dropped uint64
	// DroppedMalformed: not [topic, 8-byte sequence number, payload]. DroppedTopic: a topic
	// that names no configured replica (a source without ID). DroppedUndecodable: a payload,
	// received or replayed, that does not decode or breaks a Limit; it changes nothing, its
	// sequence number included. DroppedOverflow: a BlockStored that would take a replica
	// past MaxKeysPerEndpoint; the replica is cleared and marked stale.
	DroppedMalformed, DroppedTopic, DroppedUndecodable, DroppedOverflow uint64
	// Unknown counts events of unknown types; Skipped counts events the index cannot use
	// (another block size, a parent it never saw, a medium other than GPU).
	Unknown, Skipped         uint64
	Gaps, Replayed, Restarts uint64
	// Closed* count connections the wire guard closed, by WireReason, before zmq4 read what
	// broke the rule.
	ClosedFrameTooLarge, ClosedTooManyFrames, ClosedMessageTooLarge, ClosedProtocol, ClosedConnLimit uint64
}

// Count is one labelled counter.
type Count struct {
	Reason string // the metric label value
	N      uint64
}

// DroppedBy lists Dropped by reason: malformed, topic, undecodable, overflow.
func (s Stats) DroppedBy() []Count {
	return []Count{{"malformed", s.DroppedMalformed}, {"topic", s.DroppedTopic},
		{"undecodable", s.DroppedUndecodable}, {"overflow", s.DroppedOverflow}}
}

// ClosedBy lists the connections the guard closed by reason (WireReason's String).
func (s Stats) ClosedBy() []Count {
	return []Count{{WireFrameTooLarge.String(), s.ClosedFrameTooLarge}, {WireTooManyFrames.String(), s.ClosedTooManyFrames},
		{WireMessageTooLarge.String(), s.ClosedMessageTooLarge}, {WireProtocol.String(), s.ClosedProtocol},
		{WireConnLimit.String(), s.ClosedConnLimit}}
}

type dropReason uint8

const (
	dropMalformed dropReason = iota
	dropTopic
	dropUndecodable
	dropOverflow
)

// drop counts one message dropped whole; x.mu is held.
func (x *Index) drop(r dropReason) {
	x.stats.Dropped++
	switch r {
	case dropMalformed:
		x.stats.DroppedMalformed++
	case dropTopic:
		x.stats.DroppedTopic++
	case dropUndecodable:
		x.stats.DroppedUndecodable++
	case dropOverflow:
		x.stats.DroppedOverflow++
	}
}

func (x *Index) countDrop(r dropReason) { x.mu.Lock(); x.drop(r); x.mu.Unlock() }

// countWire counts a connection the guard closed.
func (x *Index) countWire(r WireReason) {
	x.mu.Lock()
	defer x.mu.Unlock()
	switch r {
	case WireFrameTooLarge:
		x.stats.ClosedFrameTooLarge++
	case WireTooManyFrames:
		x.stats.ClosedTooManyFrames++
	case WireMessageTooLarge:
		x.stats.ClosedMessageTooLarge++
	case WireProtocol:
		x.stats.ClosedProtocol++
	case WireConnLimit:
		x.stats.ClosedConnLimit++
	}
}

// Index turns each replica's engine-keyed events into router-keyed Observer calls. It is
// safe for concurrent use.
type Index struct {
	cfg IndexConfig
	obs Observer
	lim Limits

	mu    sync.Mutex
	eps   map[string]*endpoint
	stats Stats
	boot  boot // start-up and re-admission state (boot.go)
}

type endpoint struct {
	keys    map[uint64]uint64 // engine key → router key
	seq     uint64            // last sequence number applied
	started bool
	stale   bool
}

// NewIndex returns an Index feeding obs.
func NewIndex(cfg IndexConfig, lim Limits, obs Observer) *Index {
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 16
	}
	return &Index{cfg: cfg, obs: obs, lim: lim, eps: map[string]*endpoint{}}
}

func (x *Index) ep(id string) *endpoint {
	e := x.eps[id]
	if e == nil {
		e = &endpoint{keys: map[uint64]uint64{}}
		x.eps[id] = e
	}
	return e
}

// Gap is a run of sequence numbers a subscriber never received: [From, To).
type Gap struct{ From, To uint64 }

// Filler fetches the payloads of a gap, in order (a replay request); an error leaves the
// replica stale.
type Filler func(Gap) ([][]byte, error)

// Handle applies one published message of replica id (model: the served model name, the
// default salt of its keys). A payload that does not decode is dropped and changes nothing,
// its sequence number included. Before a message that follows a gap Handle fills the gap
// through fill, or, when fill is nil or fails, marks the replica stale. A sequence number at
// or below the last one means the replica restarted: its index starts clean. Handle is meant
// to be called from one goroutine per replica.
func (x *Index) Handle(id, model string, seq uint64, payload []byte, fill Filler) error {
	b, err := Decode(payload, x.lim)
	if err != nil {
		x.countDrop(dropUndecodable)
		return err
	}
	if x.admit(id, model, seq, fill) {
		return nil
	}
	x.mu.Lock()
	e := x.ep(id)
	var gap *Gap
	switch {
	case !e.started:
	case seq <= e.seq:
		x.stats.Restarts++
		x.clear(id, e)
		e.stale = false
	case seq > e.seq+1:
		x.stats.Gaps++
		gap = &Gap{From: e.seq + 1, To: seq}
	}
	e.started, e.seq = true, seq
	x.mu.Unlock()
	var ferr error
	if gap != nil {
		var missed [][]byte
		if fill == nil {
			ferr = fmt.Errorf("kvevents: %s: missed messages %d to %d and no replay endpoint", id, gap.From, gap.To-1)
		} else if missed, ferr = fill(*gap); ferr != nil {
			ferr = fmt.Errorf("kvevents: %s: replay of %d to %d: %w", id, gap.From, gap.To-1, ferr)
		}
		x.mu.Lock()
		if ferr != nil {
			e.stale = true
		}
		for _, p := range missed {
			if b, err := Decode(p, x.lim); err == nil {
				x.stats.Replayed++
				x.apply(id, model, e, &b)
			} else {
				x.drop(dropUndecodable)
			}
		}
		x.mu.Unlock()
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.apply(id, model, e, &b)
	return ferr
}

// MarkStale records that replica id's index missed events it could not recover: it is kept
// (scores stay useful) but reported stale until the replica restarts or clears its cache.
func (x *Index) MarkStale(id string) {
	x.mu.Lock()
	x.ep(id).stale = true
	x.mu.Unlock()
}

// Forget drops replica id (removed from the pool).
func (x *Index) Forget(id string) {
	x.mu.Lock()
	if e := x.eps[id]; e != nil {
		x.clear(id, e)
		delete(x.eps, id)
	}
	x.mu.Unlock()
}

// Stale returns the replicas whose index is stale, sorted.
func (x *Index) Stale() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for id, e := range x.eps {
		if e.stale {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Keys returns how many blocks replica id holds in the index.
func (x *Index) Keys(id string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.eps[id]; e != nil {
		return len(e.keys)
	}
	return 0
}

// Stats returns the counters.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stats
}

func (x *Index) clear(id string, e *endpoint) {
	clear(e.keys)
	x.obs.AllBlocksCleared(id)
}

func (x *Index) apply(id, model string, e *endpoint, b *Batch) {
	x.stats.Batches++
	x.stats.Unknown += uint64(b.Unknown)
	for i := range b.Events {
		ev := &b.Events[i]
		x.stats.Events++
		if ev.Medium != "" && ev.Medium != gpu {
			x.stats.Skipped++ // an offload tier: the GPU cache did not change
			continue
		}
		switch ev.Kind {
		case AllBlocksCleared:
			x.stats.Cleared++
			x.clear(id, e)
			e.stale = false
		case BlockRemoved:
			for _, h := range ev.Hashes {
				if rk, ok := e.keys[h]; ok {
					delete(e.keys, h)
					x.stats.Removed++
					x.obs.BlockRemoved(id, rk, gpu)
				}
			}
		case BlockStored:
			x.stored(id, model, e, ev)
		}
	}
}

// stored keys each block by the chained hash of its tokens, seeded with the parent's router
// key (or, for a request's first block, the LoRA adapter's or model's name, as
// router/prefix.ModelSalt seeds the keys of incoming requests).
func (x *Index) stored(id, model string, e *endpoint, ev *Event) {
	if len(ev.Tokens) == 0 { // no tokens (an offload tier re-storing): known engine keys only
		for _, h := range ev.Hashes {
			if rk, ok := e.keys[h]; ok {
				x.stats.Stored++
				x.obs.BlockStored(id, rk, gpu)
			}
		}
		return
	}
	if ev.BlockSize != x.cfg.BlockSize {
		x.stats.Skipped++
		return
	}
	var parent uint64
	_, known := e.keys[ev.Parent]
	switch {
	case !ev.HasParent || ev.Parent == 0 && !known:
		// No parent: a request's first new block. llm-d-inference-sim's positional
		// encoding writes 0 instead of nil there (kv_cache_sender.go encodeEvent), and
		// llm-d's VLLMAdapter reads nil as 0 too.
		name := model
		if ev.LoRAName != "" {
			name = ev.LoRAName
		}
		parent = prefix.ModelSalt(name)
	default:
		rk, ok := e.keys[ev.Parent]
		if !ok {
			x.stats.Skipped++ // its parent's tokens are unknown: no router key to chain from
			return
		}
		parent = rk
	}
	if len(e.keys)+len(ev.Hashes) > x.cfg.MaxKeysPerEndpoint && x.cfg.MaxKeysPerEndpoint > 0 {
		x.clear(id, e)
		e.stale = true
		x.drop(dropOverflow)
		return
	}
	for i, h := range ev.Hashes {
		parent = prefix.TokenBlockHash(parent, ev.Tokens[i*ev.BlockSize:(i+1)*ev.BlockSize])
		e.keys[h] = parent
		x.stats.Stored++
		x.obs.BlockStored(id, parent, gpu)
	}
}
