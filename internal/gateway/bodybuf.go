package gateway

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// Request bodies are read into buffers taken from a pool and given back when the last reader
// of the body is done: the call (which may send it again to another backend) and every
// attempt's transport, which may close a request body after RoundTrip returned. At 220 KB
// bodies, allocating and zeroing a fresh buffer per request was a fifth of the router's CPU
// (docs/proxy.md). Buffers above maxPooledBody are left to the garbage collector, so the pool
// never pins the memory of a rare huge request.
const maxPooledBody = 4 << 20

var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// bodyBuf is one request body and the count of its readers.
type bodyBuf struct {
	buf  *[]byte
	refs atomic.Int32
}

// newBodyBuf returns a buffer of length 0 from the pool, held once by the caller.
func newBodyBuf() *bodyBuf {
	b := &bodyBuf{buf: bodyPool.Get().(*[]byte)}
	*b.buf = (*b.buf)[:0]
	b.refs.Store(1)
	return b
}

// bytes returns the body read so far.
func (b *bodyBuf) bytes() []byte { return *b.buf }

// reader returns a reader of the body that holds it until closed.
func (b *bodyBuf) reader() io.ReadCloser {
	b.refs.Add(1)
	return &bodyReader{Reader: bytes.NewReader(*b.buf), owner: b}
}

// release drops one hold; the last gives the buffer back to the pool.
func (b *bodyBuf) release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	if cap(*b.buf) <= maxPooledBody {
		bodyPool.Put(b.buf)
	}
	b.buf = nil
}

// bodyReader reads a body for one attempt; Close gives up its hold, once.
type bodyReader struct {
	*bytes.Reader
	owner  *bodyBuf
	closed atomic.Bool
}

func (r *bodyReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.owner.release()
	}
	return nil
}
