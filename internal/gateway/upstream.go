package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits of the connection pools to backends.
const (
	// upstreamIdleTimeout is how long a connection may wait in a pool before it is closed
	// rather than reused: less than the 5s keep-alive timeout of uvicorn, which serves vLLM's
	// API, so that the gateway drops idle connections before the backend does.
	upstreamIdleTimeout = 4 * time.Second
	// maxIdlePerUpstream bounds the idle connections kept per backend.
	maxIdlePerUpstream = 1024
	// dialTimeout bounds connecting to a backend, TLS handshake included.
	dialTimeout = 5 * time.Second
	// upstreamBufSize is the read buffer of a backend connection, and the longest header line
	// or chunk-size line accepted from a backend.
	upstreamBufSize = 16 << 10
)

// aLongTimeAgo is a deadline in the past: setting it makes a connection's I/O fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// upstream is one backend's pool of keep-alive HTTP/1.1 connections. A connection belongs to
// the goroutine that took it until that goroutine puts it back or closes it: it writes the
// request and reads the response itself, and the pool runs no goroutine of its own.
type upstream struct {
	addr string      // host:port dialled
	host string      // the Host header sent
	tls  *tls.Config // nil for http
	// chatPath and complPath are the request targets of the two completion endpoints, under
	// the base URL's path.
	chatPath, complPath string

	mu     sync.Mutex
	idle   []*upConn // the most recently used last
	closed bool
}

// upConn is one connection to a backend.
type upConn struct {
	nc     net.Conn
	br     *bufio.Reader
	idleAt time.Time
	abort  func() // makes the connection's pending and later I/O fail at once
}

// newUpstream returns an empty pool for the backend at base, a URL normalizeURL accepted;
// tlsConf, when not nil, is cloned for https backends.
func newUpstream(base string, tlsConf *tls.Config) (*upstream, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("gateway: backend %s: %w", base, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	up := &upstream{addr: net.JoinHostPort(u.Hostname(), port), host: u.Host,
		chatPath: u.EscapedPath() + "/v1/chat/completions", complPath: u.EscapedPath() + "/v1/completions"}
	if u.Scheme == "https" {
		up.tls = &tls.Config{}
		if tlsConf != nil {
			up.tls = tlsConf.Clone()
		}
		up.tls.ServerName, up.tls.NextProtos = u.Hostname(), []string{"http/1.1"}
	}
	return up, nil
}

// get returns an idle connection (reused true), or a new one when there is none or fresh is
// set.
func (u *upstream) get(ctx context.Context, fresh bool) (c *upConn, reused bool, err error) {
	if !fresh {
		if c := u.pop(time.Now()); c != nil {
			return c, true, nil
		}
	}
	c, err = u.dial(ctx)
	return c, false, err
}

// pop takes the most recently used idle connection, closing those idle for too long.
func (u *upstream) pop(now time.Time) *upConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	for n := len(u.idle); n > 0; n = len(u.idle) {
		c := u.idle[n-1]
		u.idle[n-1] = nil
		u.idle = u.idle[:n-1]
		if now.Sub(c.idleAt) < upstreamIdleTimeout {
			return c
		}
		c.close()
	}
	return nil
}

// put returns c to the pool, or closes it when the pool is full or closed. Connections idle
// for too long are closed on the way, the oldest first.
func (u *upstream) put(c *upConn) {
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	expired := 0
	for expired < len(u.idle) && now.Sub(u.idle[expired].idleAt) >= upstreamIdleTimeout {
		u.idle[expired].close()
		expired++
	}
	if expired > 0 {
		n := copy(u.idle, u.idle[expired:])
		clear(u.idle[n:])
		u.idle = u.idle[:n]
	}
	if u.closed || len(u.idle) >= maxIdlePerUpstream {
		c.close()
		return
	}
	c.idleAt = now
	u.idle = append(u.idle, c)
}

// closeIdle closes the idle connections and makes put close the others as they come back:
// the backend left the pool.
func (u *upstream) closeIdle() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, c := range u.idle {
		c.close()
	}
	clear(u.idle)
	u.idle = u.idle[:0]
}

func (u *upstream) dial(ctx context.Context) (*upConn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", u.addr)
	if err != nil {
		return nil, err
	}
	if u.tls != nil {
		tc := tls.Client(nc, u.tls)
		hctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	return &upConn{nc: nc, br: bufio.NewReaderSize(nc, upstreamBufSize),
		abort: func() { _ = nc.SetDeadline(aLongTimeAgo) }}, nil
}

func (c *upConn) close() { _ = c.nc.Close() }

// write sends head and body with one write when they are small, else with one writev.
func (c *upConn) write(buf *[]byte, head, body []byte) error {
	if len(head)+len(body) <= 64<<10 {
		*buf = append(append((*buf)[:0], head...), body...)
		_, err := c.nc.Write(*buf)
		return err
	}
	bufs := net.Buffers{head, body}
	_, err := bufs.WriteTo(c.nc)
	return err
}

// skipRequestField lists the client header fields not forwarded to a backend: hop-by-hop
// fields (RFC 9110 §7.6.1), those the gateway writes itself, Expect (the gateway has the
// whole body), and Accept-Encoding, so that the backend answers uncompressed and the gateway
// can read the usage from the body.
var skipRequestField = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Expect": true, "Accept-Encoding": true,
}

// appendRequestHead appends the head of a POST of n body bytes to path on u: the request
// line, Host, the client's end-to-end fields from h (Authorization too unless dropAuth), and
// Content-Length.
func (u *upstream) appendRequestHead(dst []byte, path string, h http.Header, dropAuth bool, n int) []byte {
	dst = append(dst, "POST "...)
	dst = append(dst, path...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, u.host...)
	dst = append(dst, "\r\n"...)
	conn := h["Connection"]
	for k, vs := range h {
		if skipRequestField[k] || (dropAuth && k == "Authorization") || (len(conn) > 0 && namedIn(conn, k)) {
			continue
		}
		for _, v := range vs {
			dst = append(dst, k...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, "\r\n"...)
		}
	}
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "\r\n\r\n"...)
}

// namedIn reports whether the Connection field values list name.
func namedIn(conn []string, name string) bool {
	for _, v := range conn {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}

// isStale reports the errors a connection taken from the pool fails with, before any byte
// of a response, when the backend closed it while it was idle.
func isStale(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
