package kvevents

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
)

// The guard sits between zmq4 and the network. zmq4 (v0.17.0) allocates whatever length a
// frame header announces (conn.go Conn.read: make([]byte, size)) and indexes past a
// truncated READY property (protocol.go Property.Write), both in goroutines a caller cannot
// recover; it also keeps every frame of an unfinished message. zmq4 looks transports up by
// the endpoint's scheme (transport.go RegisterTransport) and hands them the socket's
// context (socket.go Dial, Listen), so this package registers "kvevents-tcp" and
// "kvevents-ipc" transports whose connections run every byte through a zmtpParser before
// zmq4 reads it, with the limits and counters of the socket found in that context.

// guardScheme prefixes the guarded transports' names.
const guardScheme = "kvevents-"

// guard is what the connections of one socket share.
type guard struct {
	lim   WireLimits
	own   zmq4.SocketType
	count func(WireReason)
	conns atomic.Int64 // open connections of a bound socket
}

type guardKey struct{}

// withGuard returns ctx carrying g, for the socket made with it.
func withGuard(ctx context.Context, g *guard) context.Context {
	return context.WithValue(ctx, guardKey{}, g)
}

// registerGuards registers the guarded transports with zmq4, once per process.
var registerGuards = sync.OnceValue(func() error {
	var errs []error
	for scheme, network := range map[string]string{"tcp": "tcp", "ipc": "unix"} {
		if err := zmq4.RegisterTransport(guardScheme+scheme, guardTransport{transport.New(network)}); err != nil {
			errs = append(errs, fmt.Errorf("kvevents: guarded transport: %w", err))
		}
	}
	return errors.Join(errs...)
})

// guardedSocket makes a socket of type own whose connections g guards; endpoints passed to
// it go through guardedEndpoint.
func guardedSocket(ctx context.Context, g *guard, mk func(context.Context, ...zmq4.Option) zmq4.Socket, opts ...zmq4.Option) (zmq4.Socket, error) {
	if err := registerGuards(); err != nil {
		return nil, err
	}
	return mk(withGuard(ctx, g), opts...), nil
}

// guardedEndpoint rewrites tcp:// and ipc:// endpoints to the guarded transports.
func guardedEndpoint(ep string) (string, error) {
	for _, scheme := range []string{"tcp://", "ipc://"} {
		if strings.HasPrefix(ep, scheme) {
			return guardScheme + ep, nil
		}
	}
	return "", fmt.Errorf("kvevents: endpoint %q: want tcp:// or ipc://", ep)
}

// guardTransport wraps a net transport's connections in guardConns.
type guardTransport struct{ base transport.Transport }

func guardOf(ctx context.Context) (*guard, error) {
	if g, ok := ctx.Value(guardKey{}).(*guard); ok {
		return g, nil
	}
	return nil, errors.New("kvevents: a guarded endpoint on a socket made without a guard")
}

// Dial connects to addr and guards the connection.
func (t guardTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	g, err := guardOf(ctx)
	if err != nil {
		return nil, err
	}
	c, err := t.base.Dial(ctx, d, addr)
	if err != nil {
		return nil, err
	}
	return g.wrap(c, nil), nil
}

// Listen listens on addr and guards every connection it accepts.
func (t guardTransport) Listen(ctx context.Context, addr string) (net.Listener, error) {
	g, err := guardOf(ctx)
	if err != nil {
		return nil, err
	}
	l, err := t.base.Listen(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &guardListener{Listener: l, g: g}, nil
}

// Addr resolves an endpoint's address as the base transport does.
func (t guardTransport) Addr(ep string) (string, error) { return t.base.Addr(ep) }

// guardListener accepts at most g.lim.MaxConns connections at once; one past it is closed
// at once and counted.
type guardListener struct {
	net.Listener
	g *guard
}

func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.conns.Add(1) <= int64(l.g.lim.MaxConns) {
			return l.g.wrap(c, func() { l.g.conns.Add(-1) }), nil
		}
		l.g.conns.Add(-1)
		l.g.count(WireConnLimit)
		c.Close()
	}
}

// wrap guards c; release runs once when it closes.
func (g *guard) wrap(c net.Conn, release func()) net.Conn {
	if g.lim.HandshakeTimeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(g.lim.HandshakeTimeout))
	}
	return &guardConn{Conn: c, g: g, p: newZMTPParser(g.lim, g.own), release: release}
}

// guardConn passes on only bytes its parser accepted. On a violation it closes the
// connection and returns a *WireError without the chunk that broke the rule. zmq4 does not
// close a connection whose handshake fails, so a guardConn closes itself on any error before
// the peer's READY command has been checked.
type guardConn struct {
	net.Conn
	g       *guard
	p       *zmtpParser // used by the one goroutine zmq4 reads with
	release func()
	ready   atomic.Bool // the handshake is done: the deadline is lifted
	once    sync.Once
}

func (c *guardConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		if perr := c.p.feed(b[:n]); perr != nil {
			var we *WireError
			if errors.As(perr, &we) {
				c.g.count(we.Reason)
			}
			c.Close()
			return 0, perr
		}
		if c.p.ready && !c.ready.Load() {
			c.ready.Store(true)
			_ = c.Conn.SetReadDeadline(time.Time{})
		}
	}
	if err != nil && !c.ready.Load() {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.g.count(WireProtocol) // a handshake past HandshakeTimeout
		}
		c.Close()
	}
	return n, err
}

func (c *guardConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && !c.ready.Load() {
		c.Close()
	}
	return n, err
}

// Close closes the connection and frees its place under MaxConns (once).
func (c *guardConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
	return err
}
