package gateway

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Timeout errors: an attempt at a backend waited too long in one of its phases.
var (
	ErrHeaderTimeout    = errors.New("gateway: backend sent no response headers in time")
	ErrFirstByteTimeout = errors.New("gateway: backend sent no response body in time")
	ErrIdleTimeout      = errors.New("gateway: backend stream idle for too long")
)

func isTimeout(err error) bool {
	return errors.Is(err, ErrHeaderTimeout) || errors.Is(err, ErrFirstByteTimeout) || errors.Is(err, ErrIdleTimeout)
}

// phase is where an exchange is: waiting for the response head, its first body byte, or more.
type phase uint8

const (
	phaseHeader phase = iota
	phaseFirstByte
	phaseIdle
)

var phaseErrs = [...]error{ErrHeaderTimeout, ErrFirstByteTimeout, ErrIdleTimeout}

// exchange is one request sent to a backend on a pooled connection, and its response, read
// by the goroutine that sent the request. Timeouts are connection deadlines, and the end of
// the request's context aborts the connection's I/O: no other goroutine or timer takes part.
// Exchanges live in pooled calls and keep their buffers from one request to the next.
type exchange struct {
	up      *upstream
	conn    *upConn
	head    respHead
	body    body
	ctx     context.Context
	stop    func() bool // unregisters conn.abort from ctx; nil when ctx is never done
	to      TimeoutsConfig
	phase   phase
	reqHead []byte // the request head, set by the caller before send
	wbuf    []byte // scratch: head and body, for one write
}

// send writes the request (reqHead, then body) on a connection to up and reads the response
// head. A pooled connection that the backend had closed is replaced by a new one, once: that
// is safe because the backend answered nothing on it.
func (x *exchange) send(ctx context.Context, up *upstream, body []byte, to TimeoutsConfig) error {
	x.ctx, x.up, x.to = ctx, up, to
	for fresh := false; ; fresh = true {
		c, reused, err := up.get(ctx, fresh)
		if err != nil {
			return err
		}
		x.attach(c)
		answered, err := x.roundTrip(body)
		if err == nil {
			return nil
		}
		err = x.mapErr(err)
		x.discard()
		if !reused || answered || !isStale(err) || ctx.Err() != nil {
			return err
		}
	}
}

// attach makes c the exchange's connection, aborted if the request's context ends.
func (x *exchange) attach(c *upConn) {
	x.conn, x.stop = c, nil
	if x.ctx.Done() != nil {
		x.stop = context.AfterFunc(x.ctx, c.abort)
	}
}

// roundTrip writes the request and reads the response head. answered reports whether any
// byte of a response arrived.
func (x *exchange) roundTrip(body []byte) (answered bool, err error) {
	c := x.conn
	x.phase = phaseHeader
	if err := x.setDeadline(false, x.to.Header); err != nil {
		return false, err
	}
	if err := c.write(&x.wbuf, x.reqHead, body); err != nil {
		return false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return false, err
	}
	if err := x.head.read(c.br); err != nil {
		return true, err
	}
	x.body.reset(c.br, x.head.mode, x.head.length)
	x.phase = phaseFirstByte
	return true, nil
}

// Read reads the response body. Each read that may wait on the connection is bounded by the
// first-byte timeout, then by the idle timeout.
func (x *exchange) Read(p []byte) (int, error) {
	if !x.buffered(len(p)) {
		d := x.to.Idle
		if x.phase == phaseFirstByte {
			d = x.to.FirstByte
		}
		if err := x.setDeadline(true, d); err != nil {
			return 0, x.mapErr(err)
		}
	}
	n, err := x.body.Read(p)
	if n > 0 {
		x.phase = phaseIdle
	}
	if err != nil && err != io.EOF {
		err = x.mapErr(err)
	}
	return n, err
}

// setDeadline sets the connection's read deadline, or both deadlines, d from now, then fails
// if the request's context has ended: its abort may have set a past deadline just before,
// which this one undid. A context ends before its AfterFunc runs, so checking after setting
// misses no abort.
func (x *exchange) setDeadline(readOnly bool, d time.Duration) error {
	t := time.Now().Add(d)
	var err error
	if readOnly {
		err = x.conn.nc.SetReadDeadline(t)
	} else {
		err = x.conn.nc.SetDeadline(t)
	}
	if err != nil {
		return err
	}
	return x.ctx.Err()
}

// buffered reports whether a read of up to n bytes is served from the buffer alone.
func (x *exchange) buffered(n int) bool {
	return x.body.done() || (x.body.mode == bodyLength && int64(x.conn.br.Buffered()) >= min(x.body.left, int64(n)))
}

// mapErr turns a deadline error, unless the request's context ended, into the timeout error
// of the phase it happened in.
func (x *exchange) mapErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) && x.ctx.Err() == nil {
		return phaseErrs[x.phase]
	}
	return err
}

// close ends the exchange: the connection goes back to the pool when the response was read
// to its end and the backend keeps the connection open; otherwise it is closed. It does
// nothing when the exchange has no connection.
func (x *exchange) close() {
	x.end(x.body.done() && !x.head.close && x.conn != nil && x.conn.br.Buffered() == 0)
}

// discard ends the exchange and closes its connection.
func (x *exchange) discard() { x.end(false) }

func (x *exchange) end(reuse bool) {
	c := x.conn
	if c == nil {
		return
	}
	if x.stop != nil && !x.stop() {
		reuse = false // aborted: the deadline is in the past
	}
	x.conn, x.stop = nil, nil
	if reuse {
		x.up.put(c)
	} else {
		c.close()
	}
}

// recycle clears x for the next request, keeping its buffers.
func (x *exchange) recycle() {
	*x = exchange{reqHead: x.reqHead[:0], wbuf: x.wbuf[:0],
		head: respHead{fields: x.head.fields[:0], vals: x.head.vals[:0], fr: framing{tokens: x.head.fr.tokens[:0]}}}
}
