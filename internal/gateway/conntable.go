package gateway

import (
	"net"
	"net/http"
	"sync"
)

// connTable counts a Server's open connections, in all and by client IP address, and knows
// which are idle: kept alive between requests (net/http's StateIdle).
type connTable struct {
	max, perClient int

	mu       sync.Mutex
	open     int
	byClient map[string]*clientConns
}

type clientConns struct {
	open int
	idle map[*slotConn]struct{}
}

func newConnTable(maxConns, perClient int) *connTable {
	return &connTable{max: maxConns, perClient: perClient, byClient: map[string]*clientConns{}}
}

// admit counts c as open and returns it wrapped, or returns the refusal to answer it with.
// At the cap it sheds an idle connection of the client holding the most, which the caller
// closes, and admits c in its place.
func (t *connTable) admit(c net.Conn) (sc *slotConn, shed *slotConn, refusal string) {
	client := clientOf(c.RemoteAddr())
	t.mu.Lock()
	defer t.mu.Unlock()
	cc := t.byClient[client]
	if cc != nil && cc.open >= t.perClient {
		return nil, nil, clientBusyResponse
	}
	if t.open >= t.max {
		if shed = t.idlest(); shed == nil {
			return nil, nil, busyResponse
		}
		t.forget(shed)
	}
	if cc == nil {
		cc = &clientConns{idle: map[*slotConn]struct{}{}}
		t.byClient[client] = cc
	}
	cc.open++
	t.open++
	return &slotConn{Conn: c, t: t, client: client}, shed, ""
}

// idlest returns an idle connection of the client holding the most connections that has
// one, or nil. t.mu is held.
func (t *connTable) idlest() *slotConn {
	var top *clientConns
	for _, cc := range t.byClient {
		if len(cc.idle) > 0 && (top == nil || cc.open > top.open) {
			top = cc
		}
	}
	if top == nil {
		return nil
	}
	for c := range top.idle {
		return c
	}
	return nil
}

// forget stops counting c, once. t.mu is held.
func (t *connTable) forget(c *slotConn) {
	if c.gone {
		return
	}
	c.gone = true
	cc := t.byClient[c.client]
	delete(cc.idle, c)
	t.open--
	if cc.open--; cc.open == 0 {
		delete(t.byClient, c.client)
	}
}

// track is the server's ConnState hook: it keeps the idle set.
func (t *connTable) track(c net.Conn, state http.ConnState) {
	sc, ok := c.(*slotConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if sc.gone {
		return
	}
	if state == http.StateIdle {
		t.byClient[sc.client].idle[sc] = struct{}{}
	} else {
		delete(t.byClient[sc.client].idle, sc)
	}
}

// clientOf is the client's key: the IP address of addr, or addr whole when it has no port.
func clientOf(addr net.Addr) string {
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// slotConn is an admitted connection; it stops being counted when closed.
type slotConn struct {
	net.Conn
	t      *connTable
	client string
	gone   bool // no longer counted; guarded by t.mu
}

func (c *slotConn) Close() error {
	c.t.mu.Lock()
	c.t.forget(c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}
