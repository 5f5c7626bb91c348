package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

// Sizes of a client connection's buffers and limits.
const (
	// serverBufSize is a client connection's read buffer, and the longest request line or
	// header line accepted (431 beyond).
	serverBufSize = 8 << 10
	// maxDrain bounds the unread request body discarded to keep a connection alive.
	maxDrain = 256 << 10
)

// serverConn is one client connection. Its goroutine reads requests one after the other and
// calls the handler for each; the request, response and buffers are reused from one request
// to the next.
type serverConn struct {
	s      *Server
	nc     net.Conn
	src    aheadReader
	br     *bufio.Reader
	remote string
	ctx    context.Context // ends when the client goes away or the connection closes
	cancel context.CancelFunc
	tmpl   http.Request // a request with ctx; each request starts as a copy of it
	req    http.Request
	hdr    http.Header
	url    url.URL
	head   reqHead
	body   reqBody
	w      respWriter
	watch  watcher
	active atomic.Bool // serving a request, not waiting for one
}

func newServerConn(s *Server, nc net.Conn) *serverConn {
	c := &serverConn{s: s, nc: nc, remote: nc.RemoteAddr().String(), hdr: http.Header{}}
	c.src.nc = nc
	c.br = bufio.NewReaderSize(&c.src, serverBufSize)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.tmpl = *(&http.Request{}).WithContext(c.ctx)
	c.body.c, c.w.c, c.watch.c = c, c, c
	c.w.header = http.Header{}
	c.watch.done = make(chan struct{}, 1)
	return c
}

// serve runs the connection until the client closes it, an error, or a shutdown.
func (c *serverConn) serve() {
	defer c.close()
	for first := true; c.await(first); first = false {
		if err := c.readRequest(); err != nil {
			c.refuse(err)
			return
		}
		if !c.serveRequest() || !c.s.setActive(c, false) {
			return
		}
	}
}

func (c *serverConn) close() {
	c.cancel()
	_ = c.nc.Close()
	c.s.forget(c)
}

// await waits for the first byte of the next request, then marks the connection active.
func (c *serverConn) await(first bool) bool {
	d := c.s.cfg.IdleTimeout
	if first {
		d = c.s.cfg.ReadHeaderTimeout
	}
	if c.br.Buffered() == 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(d))
	}
	if _, err := c.br.Peek(1); err != nil {
		return false
	}
	return c.s.setActive(c, true)
}

// readRequest reads the next request's head and sets up its body and response.
func (c *serverConn) readRequest() error {
	c.req = c.tmpl
	r := &c.req
	clear(c.hdr)
	r.Header, r.RemoteAddr = c.hdr, c.remote
	_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ReadHeaderTimeout))
	if err := c.head.read(c.br, r, &c.url, c.s.cfg.MaxHeaderBytes); err != nil {
		return err
	}
	_ = c.nc.SetReadDeadline(time.Time{})
	mode := bodyLength
	if r.ContentLength < 0 {
		mode = bodyChunked
	}
	c.body.reset(mode, max(r.ContentLength, 0), c.head.expect)
	r.Body = &c.body
	if r.ContentLength == 0 {
		r.Body = http.NoBody
	}
	c.w.reset(r.Method == http.MethodHead, r.Close)
	return nil
}

// serveRequest calls the handler and ends its response. It reports whether the connection
// can carry another request.
func (c *serverConn) serveRequest() bool {
	c.watch.arm()
	ok := c.callHandler()
	c.watch.disarm()
	if !ok {
		return false
	}
	if c.body.expect && !c.body.body.done() {
		c.w.close = true // the client waits for 100 Continue before it sends the body
	}
	c.w.finish()
	return !c.w.close && c.ctx.Err() == nil && c.body.drain()
}

// callHandler runs the handler. A panic aborts the response: the connection is closed with
// whatever had been sent, as net/http does; any panic but http.ErrAbortHandler is reported.
func (c *serverConn) callHandler() (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			ok = false
			if v != http.ErrAbortHandler {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.s.report(fmt.Errorf("gateway: server: panic serving %s: %v\n%s", c.remote, v, buf))
			}
		}
	}()
	c.s.handler.ServeHTTP(&c.w, &c.req)
	return true
}

// refuse answers a request whose head could not be read, if it deserves an answer.
func (c *serverConn) refuse(err error) {
	var he *headError
	if !errors.As(err, &he) {
		return // timeout or the client closed the connection: nobody to tell
	}
	text := http.StatusText(he.status)
	msg := statusLine(he.status) + "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: " +
		fmt.Sprint(len(text)+len(he.msg)+2) + "\r\n\r\n" + text + ": " + he.msg
	_ = c.nc.SetDeadline(time.Now().Add(time.Second))
	_, _ = io.WriteString(c.nc, msg)
	// Closing with unread bytes would reset the connection, which can destroy the answer
	// before the client reads it: close the sending side and discard what still comes.
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, maxDrain))
	}
}

// aheadReader reads from the connection, after a byte the watcher may have read ahead.
type aheadReader struct {
	nc  net.Conn
	b   byte
	has bool
}

func (a *aheadReader) Read(p []byte) (int, error) {
	if a.has && len(p) > 0 {
		p[0], a.has = a.b, false
		return 1, nil
	}
	return a.nc.Read(p)
}

// reqBody is a request's body as the handler reads it.
type reqBody struct {
	c      *serverConn
	body   body
	expect bool        // Expect: 100-continue, not answered yet
	done   atomic.Bool // read to its end: from then on the watcher may read the connection
}

func (b *reqBody) reset(mode bodyMode, n int64, expect bool) {
	b.body.reset(b.c.br, mode, n)
	b.expect = expect
	b.done.Store(b.body.done())
}

// Read reads the body, first telling a client that expects it to go on.
func (b *reqBody) Read(p []byte) (int, error) {
	if b.expect {
		b.expect = false
		if !b.body.done() {
			if _, err := io.WriteString(b.c.nc, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return 0, err
			}
		}
	}
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.done.Store(true)
	}
	return n, err
}

// Close does nothing: the server discards what the handler left unread.
func (b *reqBody) Close() error { return nil }

// drain discards what the handler left of the body, up to maxDrain bytes. It reports whether
// the body ended, so that the connection can carry the next request.
func (b *reqBody) drain() bool {
	if b.body.done() {
		return true
	}
	if b.expect {
		return false
	}
	_, err := io.Copy(io.Discard, io.LimitReader(&b.body, maxDrain))
	return err == nil && b.body.done()
}

// isDeadline reports an I/O error caused by a deadline.
func isDeadline(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
