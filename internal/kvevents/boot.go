package kvevents

import "time"

// DuplicateWindow is how long after Load a message numbered at or below the loaded sequence
// number is taken as one the snapshot already holds (skipped) rather than as a restart of
// the replica. The messages a router receives while it fetches a snapshot arrive right
// after it loads it; a replica that restarts within the window is seen as restarted by its
// first message after it, or by the gateway's health checks.
const DuplicateWindow = 10 * time.Second

// boot is an Index's start-up and re-admission state, guarded by Index.mu.
type boot struct {
	held       chan struct{} // non-nil while Hold holds messages back; closed by Release
	per        map[string]*bootEndpoint
	duplicates uint64
	restored   uint64
}

type bootEndpoint struct {
	loadedAt  time.Time // when Load filled it; zero once its first later message came
	seen      bool      // a message was handled since the index started or loaded it
	behind    uint64    // messages it lacked at its first message (see Behind)
	suspended bool      // its entries left the observer (Suspend) and wait for its next message
}

// BootStats counts what the start-up and re-admission paths did.
type BootStats struct {
	// Duplicates counts messages skipped because a loaded snapshot already held them.
	Duplicates uint64
	// Restored counts replicas whose blocks were given back to the observer after a
	// suspension, their next message showing they had not restarted.
	Restored uint64
}

func (x *Index) bootEp(id string) *bootEndpoint {
	if x.boot.per == nil {
		x.boot.per = map[string]*bootEndpoint{}
	}
	b := x.boot.per[id]
	if b == nil {
		b = &bootEndpoint{}
		x.boot.per[id] = b
	}
	return b
}

// Hold makes Handle wait, from now until Release, before it applies anything: a router
// holds its subscriptions' first messages while it loads a peer's snapshot.
func (x *Index) Hold() {
	x.mu.Lock()
	if x.boot.held == nil {
		x.boot.held = make(chan struct{})
	}
	x.mu.Unlock()
}

// Release lets the messages Hold held back through, in the order they came.
func (x *Index) Release() {
	x.mu.Lock()
	if x.boot.held != nil {
		close(x.boot.held)
		x.boot.held = nil
	}
	x.mu.Unlock()
}

// Holding reports whether Hold is in force.
func (x *Index) Holding() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.boot.held != nil
}

// Load replaces the state of each replica in s (IDs as this index names them) with the
// snapshot's, telling the observer of each block, and returns the blocks loaded. A message
// of that replica numbered at or below its snapshot's Seq, within DuplicateWindow, is then
// skipped as already applied; one after a gap is a gap (replayed or marked stale).
func (x *Index) Load(s Snapshot) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, es := range s.Endpoints {
		e := x.ep(es.ID)
		x.clear(es.ID, e)
		e.seq, e.started, e.stale = es.Seq, es.Started, es.Stale
		for _, k := range es.Keys {
			e.keys[k.Engine] = k.Router
			e.hold(k.Engine, gpu) // snapshots carry the GPU tier only
			x.obs.BlockStored(es.ID, k.Router, gpu)
		}
		n += len(es.Keys)
		b := x.bootEp(es.ID)
		*b = bootEndpoint{loadedAt: time.Now()}
	}
	return n
}

// Resend tells the observer of every block the index holds (a new observer, such as the
// policy a reload installs, learns the caches at once).
func (x *Index) Resend() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for id, e := range x.eps {
		e.each(func(rk uint64, tier string) { x.obs.BlockStored(id, rk, tier) })
	}
}

// Suspend records that replica id's entries left the observer (the gateway ejected the
// replica, and its policy forgot it): its next message decides. The next sequence number
// means the replica kept its cache, and its blocks are told to the observer again before
// the message applies; one that goes back means it restarted, and the index starts clean;
// one after a gap leaves it unknown: the index starts clean from the replica's replay
// buffer when it holds the whole stream (a restarted replica's is short), else stale.
func (x *Index) Suspend(id string) {
	x.mu.Lock()
	if _, ok := x.eps[id]; ok {
		x.bootEp(id).suspended = true
	}
	x.mu.Unlock()
}

// Drop forgets replica id (removed from the pool) with its start-up state.
func (x *Index) Drop(id string) {
	x.Forget(id)
	x.mu.Lock()
	delete(x.boot.per, id)
	x.mu.Unlock()
}

// Behind returns how many of replica id's messages the index lacked when its first message
// arrived: for a router that started after the replica and loaded no snapshot, the first
// sequence number received (vLLM numbers from 0; 0 or 1 counts as the stream's start,
// llm-d-inference-sim numbering from 1); after a snapshot, the messages between its Seq and
// the first message received (a gap, then replayed or marked stale). It is 0 again after
// the replica restarts.
func (x *Index) Behind(id string) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if b := x.boot.per[id]; b != nil {
		return b.behind
	}
	return 0
}

// BootStats returns the start-up and re-admission counters.
func (x *Index) BootStats() BootStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return BootStats{Duplicates: x.boot.duplicates, Restored: x.boot.restored}
}

// admit runs before Handle applies message seq of replica id: it waits while Hold is in
// force, and reports whether the message is one a loaded snapshot already holds (to skip).
// A late start with no snapshot lacks the replica's history: it is asked of fill (the
// replica's replay buffer, which holds it while the replica is young), and without it the
// replica is marked stale.
func (x *Index) admit(id, model string, seq uint64, fill Filler) (skip bool) {
	x.mu.Lock()
	history := false
	defer func() {
		x.mu.Unlock()
		if history && fill != nil {
			x.fillHistory(id, model, seq, fill)
		}
	}()
	for held := x.boot.held; held != nil; held = x.boot.held {
		x.mu.Unlock()
		<-held
		x.mu.Lock()
	}
	e, b := x.ep(id), x.bootEp(id)
	loaded := !b.loadedAt.IsZero()
	switch {
	case loaded && e.started && seq <= e.seq && time.Since(b.loadedAt) < DuplicateWindow:
		x.boot.duplicates++
		return true
	case !b.seen && !e.started:
		b.behind = 0
		if seq > 1 {
			b.behind, e.stale, history = seq, true, true
		}
	case !b.seen && loaded && seq > e.seq+1:
		b.behind = seq - e.seq - 1
	case e.started && seq <= e.seq: // a restart: Handle clears the replica
		b.behind = 0
	case b.suspended && seq == e.seq+1:
		e.each(func(rk uint64, tier string) { x.obs.BlockStored(id, rk, tier) })
		x.boot.restored++
	case b.suspended: // a gap after the ejection: it may have restarted and lost messages
		x.clear(id, e)
		e.started, e.stale, b.behind, history = false, true, seq, true
	}
	b.seen, b.suspended, b.loadedAt = true, false, time.Time{}
	return false
}

// fillHistory applies what fill returns of messages [0, seq) of a replica this index never
// saw (from 1 when the replica numbers from 1, as llm-d-inference-sim does), and, when it
// has them all, clears the staleness of the late start.
func (x *Index) fillHistory(id, model string, seq uint64, fill Filler) {
	var missed [][]byte
	var err error
	for _, from := range []uint64{0, 1} {
		if missed, err = fill(Gap{From: from, To: seq}); err == nil {
			break
		}
	}
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.ep(id)
	dropped := false
	for _, p := range missed {
		b, err := Decode(p, x.lim)
		if err != nil {
			x.stats.Dropped++
			dropped = true
			continue
		}
		x.stats.Replayed++
		x.apply(id, model, e, &b)
	}
	e.started, e.seq = true, seq-1
	if !dropped {
		e.stale = false
		x.bootEp(id).behind = 0
	}
}
