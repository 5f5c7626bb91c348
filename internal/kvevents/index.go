package kvevents

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"kvroute/router/prefix"
)

// Observer hears router-keyed cache changes; router.KVEventObserver has this shape, so a
// precise policy (router.PreciseScorer, router.Pipeline) plugs in directly. medium is the
// tier of the store or removal, upper-cased as vLLM publishes it ("GPU", "CPU"; see tierOf).
type Observer interface {
	BlockStored(endpoint string, hash uint64, medium string)
	BlockRemoved(endpoint string, hash uint64, medium string)
	AllBlocksCleared(endpoint string)
}

// BatchObserver is an Observer that takes each BlockStored event whole: the router keys of
// its blocks, in order, the first chained to parent (hasParent false: the prompt's first
// block). router.KVEventBatchObserver has this shape. hashes is valid only during the call.
type BatchObserver interface {
	Observer
	BlocksStored(endpoint string, hashes []uint64, parent uint64, hasParent bool, medium string)
}

// gpu is vLLM's medium for the GPU's KV cache (router.MediumGPU), the tier of an event that
// names none.
const gpu = "GPU"

// tierOf normalizes an event's medium: upper-cased, empty meaning the GPU. llm-d does the
// same with lower case so that a store and a removal of one tier match
// (llm-d/llm-d-router v0.10.0 pkg/kvevents/pool.go:33-47, normalizeDeviceTier); kvroute's
// observers take vLLM's upper-case names (router.MediumGPU, router.MediumCPU).
func tierOf(medium string) string {
	if medium == "" {
		return gpu
	}
	return strings.ToUpper(medium)
}

// tierKey is one engine block in one tier of a replica.
type tierKey struct {
	hash uint64
	tier string
}

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
	// (another block size, a parent it never saw, a token-less store of blocks it never keyed).
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
	boot  boot     // start-up and re-admission state (boot.go)
	batch []uint64 // stored's scratch: one event's router keys
}

type endpoint struct {
	keys    map[uint64]uint64  // engine key → router key, while some tier holds the block
	refs    map[tierKey]uint32 // (engine key, tier) → stores not yet removed
	held    map[uint64]uint32  // engine key → stores not yet removed, all tiers together
	seq     uint64             // last sequence number applied
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
		e = &endpoint{keys: map[uint64]uint64{}, refs: map[tierKey]uint32{}, held: map[uint64]uint32{}}
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

// hold records one store of engine key h in tier (its router key already in e.keys).
func (e *endpoint) hold(h uint64, tier string) {
	e.refs[tierKey{h, tier}]++
	e.held[h]++
}

// release records a removal of engine key h from tier and reports whether a store of it
// there was outstanding (a removal of a block the tier never stored is ignored). The key is
// forgotten once every store of it, in every tier, was removed: llm-d reference-counts
// stores and removes per (pod, tier) the same way (llm-d/llm-d-router v0.10.0
// pkg/kvevents/pool.go:610-627), since vLLM's chunked CPU offloading announces a block once
// per chunk that holds it. Each outstanding removal is forwarded: observers that count
// stores, as router's precise-prefix does, need them all.
func (e *endpoint) release(h uint64, tier string) bool {
	k := tierKey{h, tier}
	n := e.refs[k]
	if n == 0 {
		return false
	}
	if n == 1 {
		delete(e.refs, k)
	} else {
		e.refs[k] = n - 1
	}
	if e.held[h]--; e.held[h] == 0 {
		delete(e.held, h)
		delete(e.keys, h)
	}
	return true
}

// each calls f once for every block a tier of e holds: its router key and tier.
func (e *endpoint) each(f func(rk uint64, tier string)) {
	for k := range e.refs {
		f(e.keys[k.hash], k.tier)
	}
}

func (x *Index) clear(id string, e *endpoint) {
	clear(e.keys)
	clear(e.refs)
	clear(e.held)
	x.obs.AllBlocksCleared(id)
}

func (x *Index) apply(id, model string, e *endpoint, b *Batch) {
	x.stats.Batches++
	x.stats.Unknown += uint64(b.Unknown)
	for i := range b.Events {
		ev := &b.Events[i]
		x.stats.Events++
		tier := tierOf(ev.Medium)
		switch ev.Kind {
		case AllBlocksCleared:
			x.stats.Cleared++
			x.clear(id, e)
			e.stale = false
		case BlockRemoved:
			for _, h := range ev.Hashes {
				if rk, ok := e.keys[h]; ok && e.release(h, tier) {
					x.stats.Removed++
					x.obs.BlockRemoved(id, rk, tier)
				}
			}
		case BlockStored:
			x.stored(id, model, e, ev, tier)
		}
	}
}

// stored keys each block by the chained hash of its tokens, seeded with the parent's router
// key (or, for a request's first block, the LoRA adapter's or model's name, as
// router/prefix.ModelSalt seeds the keys of incoming requests).
func (x *Index) stored(id, model string, e *endpoint, ev *Event, tier string) {
	if len(ev.Tokens) == 0 {
		x.tierStored(id, e, ev, tier)
		return
	}
	if ev.BlockSize != x.cfg.BlockSize {
		x.stats.Skipped++
		return
	}
	var parent uint64
	_, known := e.keys[ev.Parent]
	first := !ev.HasParent || ev.Parent == 0 && !known
	switch {
	case first:
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
	bo, whole := x.obs.(BatchObserver)
	from := parent
	x.batch = x.batch[:0]
	for i, h := range ev.Hashes {
		parent = prefix.TokenBlockHash(parent, ev.Tokens[i*ev.BlockSize:(i+1)*ev.BlockSize])
		e.keys[h] = parent
		e.hold(h, tier)
		x.stats.Stored++
		if whole {
			x.batch = append(x.batch, parent)
		} else {
			x.obs.BlockStored(id, parent, tier)
		}
	}
	if whole && len(x.batch) > 0 {
		bo.BlocksStored(id, x.batch, from, !first, tier)
	}
}

// tierStored applies a BlockStored without tokens: vLLM's CPU offloading announces the
// blocks it stored by engine hash alone (block_hashes, no token_ids, no parent). Each hash
// the replica already keyed (its GPU store carried the tokens) resolves to its router key and
// is stored in tier; unknown hashes are skipped. llm-d resolves such events through its
// engine-key → request-key map the same way (llm-d/llm-d-router v0.10.0
// pkg/kvevents/pool.go:383-427, handleDeviceTierUpdate).
func (x *Index) tierStored(id string, e *endpoint, ev *Event, tier string) {
	n := 0
	for _, h := range ev.Hashes {
		rk, ok := e.keys[h]
		if !ok {
			continue
		}
		e.hold(h, tier)
		x.stats.Stored++
		x.obs.BlockStored(id, rk, tier)
		n++
	}
	if n == 0 && len(ev.Hashes) > 0 {
		x.stats.Skipped++
	}
}
