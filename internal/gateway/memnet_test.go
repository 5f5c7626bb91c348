package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// memListener is an in-memory listener: Dial returns the client end of a net.Pipe whose
// server end Accept returns. With it net/http's server runs inside a testing/synctest
// bubble, whose clock is fake, so timeouts are tested to the nanosecond without waiting.
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

// Dial connects to the listener.
func (l *memListener) Dial() net.Conn {
	c, s := net.Pipe()
	select {
	case l.conns <- s:
	case <-l.done:
		_ = s.Close()
	}
	return c
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// memServer serves a gateway with no backend to reach (only requests refused before routing
// are sent to it) on a memListener with scfg's limits, until the test ends.
func memServer(t *testing.T, scfg ServerConfig) *memListener {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Policy, cfg.Backends = "least-request", []string{"http://backend.invalid"}
	g, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(scfg, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := newMemListener()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		<-served
	})
	return ln
}

// watch reads c until it fails, and returns a channel that gets what was read and when the
// connection closed.
func watch(c net.Conn) <-chan closed {
	ch := make(chan closed, 1)
	go func() {
		b, _ := io.ReadAll(c)
		ch <- closed{string(b), time.Now()}
	}()
	return ch
}

type closed struct {
	read string
	at   time.Time
}

// readResponse reads one response from br and returns its status and body.
func readResponse(t *testing.T, br *bufio.Reader) (int, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rawRequest is the head of a chat request with a body of length n.
func rawRequest(n int) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(n) + "\r\n\r\n"
}
