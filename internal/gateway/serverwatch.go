package gateway

import (
	"sync"
	"time"
)

// watchDelay is how long a request runs before its connection is watched for the client
// going away. Watching costs a goroutine and a read that must then be interrupted, so a
// request shorter than this never pays for it, and a longer one (an LLM completion takes
// from a fraction of a second to minutes) is cancelled at most this late.
const watchDelay = 25 * time.Millisecond

type watchState uint8

const (
	watchIdle    watchState = iota // not watching
	watchArmed                     // the timer will start a read
	watchReading                   // a read is under way
)

// watcher notices a client that closes its connection while its request is served, and
// then ends the connection's context, which cancels the backend request.
type watcher struct {
	c     *serverConn
	timer *time.Timer
	done  chan struct{} // receives once after each read a watcher starts

	mu    sync.Mutex
	state watchState
}

// arm starts watching after watchDelay.
func (wt *watcher) arm() {
	wt.mu.Lock()
	wt.state = watchArmed
	wt.mu.Unlock()
	if wt.timer == nil {
		wt.timer = time.AfterFunc(watchDelay, wt.fire)
	} else {
		wt.timer.Reset(watchDelay)
	}
}

// fire runs on the timer's goroutine: once the handler has read the whole body, it reads
// the connection until the client closes it or disarm interrupts the read. A byte that
// arrives instead (the next pipelined request) is kept for the connection's reader.
func (wt *watcher) fire() {
	c := wt.c
	wt.mu.Lock()
	switch {
	case wt.state != watchArmed:
		wt.mu.Unlock()
		return
	case !c.body.done.Load():
		wt.timer.Reset(watchDelay) // the body is still being read: look again later
		wt.mu.Unlock()
		return
	case c.br.Buffered() > 0 || c.src.has:
		wt.state = watchIdle // the next request is here: the client has not gone
		wt.mu.Unlock()
		return
	}
	wt.state = watchReading
	wt.mu.Unlock()
	var b [1]byte
	n, err := c.nc.Read(b[:])
	if n == 1 {
		c.src.b, c.src.has = b[0], true
	} else if !isDeadline(err) {
		c.cancel()
	}
	wt.done <- struct{}{}
}

// disarm stops watching, interrupting and waiting for a read under way.
func (wt *watcher) disarm() {
	wt.mu.Lock()
	st := wt.state
	wt.state = watchIdle
	wt.mu.Unlock()
	if st == watchIdle {
		return
	}
	wt.timer.Stop()
	if st == watchReading {
		_ = wt.c.nc.SetReadDeadline(aLongTimeAgo)
		<-wt.done
	}
}
