package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestSlowClientsAreCut checks each client-side timeout on the fake clock: a head that starts
// late or trickles in is cut ReadHeaderTimeout after the connection opened (once, not twice: a
// client could hold 59 s of a 30 s timeout), a body
// that stops arriving gets 408 ReadBodyTimeout after its head and the connection closes, and
// an idle kept-alive connection closes after IdleTimeout.
func TestSlowClientsAreCut(t *testing.T) {
	cfg := DefaultServerConfig()
	t.Run("head", func(t *testing.T) {
		for name, send := range map[string]func(c net.Conn){
			"first byte late": func(c net.Conn) { // the old server restarted the timeout at the first byte
				time.Sleep(cfg.ReadHeaderTimeout - time.Second)
				_, _ = io.WriteString(c, "P")
			},
			"drip": func(c net.Conn) { // one header line every 10 s, never the blank line
				for i := 0; ; i++ {
					line := "POST /v1/completions HTTP/1.1\r\n"
					if i > 0 {
						line = fmt.Sprintf("X-Drip-%d: x\r\n", i)
					}
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
					time.Sleep(10 * time.Second)
				}
			},
		} {
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					ln := memServer(t, cfg)
					start := time.Now()
					c := ln.Dial()
					done := watch(c)
					send(c)
					if got := (<-done).at.Sub(start); got != cfg.ReadHeaderTimeout {
						t.Errorf("connection closed after %v, want %v", got, cfg.ReadHeaderTimeout)
					}
				})
			})
		}
	})
	t.Run("body", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ln := memServer(t, cfg)
			c := ln.Dial()
			done := watch(c)
			if _, err := io.WriteString(c, rawRequest(100)+"{"); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got := <-done
			if d := got.at.Sub(start); d != cfg.ReadBodyTimeout {
				t.Errorf("connection closed after %v, want %v", d, cfg.ReadBodyTimeout)
			}
			if !strings.HasPrefix(got.read, "HTTP/1.1 408 ") || !strings.Contains(got.read, `"code":"request_timeout"`) {
				t.Errorf("got %q, want a 408 request_timeout error", got.read)
			}
		})
	})
	t.Run("idle", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ln := memServer(t, cfg)
			c := ln.Dial()
			br := bufio.NewReader(c)
			if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if status, _ := readResponse(t, br); status != 200 {
				t.Fatalf("/health: %d", status)
			}
			start := time.Now()
			_, err := br.ReadByte()
			if d := time.Since(start); err == nil || d != cfg.IdleTimeout {
				t.Errorf("idle connection closed after %v (%v), want %v", d, err, cfg.IdleTimeout)
			}
		})
	})
}

// TestAnnouncedLengthCostsNothing sends requests that announce 16 MiB bodies and send one
// byte: the router's memory follows what arrived, not what was announced.
func TestAnnouncedLengthCostsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultServerConfig()
		ln := memServer(t, cfg)
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		const n = 8
		conns := make([]net.Conn, n)
		for i := range conns {
			conns[i] = ln.Dial()
			if _, err := io.WriteString(conns[i], rawRequest(16<<20)+"{"); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // every handler waits for the rest of its body
		grown := int64(heap()) - int64(before)
		for _, c := range conns {
			_ = c.Close()
		}
		if grown > n<<19 { // 512 KiB a request; announcing made it 16 MiB each
			t.Errorf("%d requests announcing 16 MiB and sending 1 byte grew the heap by %d KiB", n, grown>>10)
		}
	})
}

// TestBrokenFramingClosesConnection sends a request whose chunked body is malformed, with a
// second request behind it on the same connection: the router answers with an error and
// closes the connection, so the second request is never read as one (a front proxy that
// frames the bytes differently could otherwise smuggle it). A chunk size of 2^64-1 is valid
// framing: its chunk never arrives, and the body timeout ends the request.
func TestBrokenFramingClosesConnection(t *testing.T) {
	scfg := DefaultServerConfig()
	scfg.ReadBodyTimeout = 300 * time.Millisecond
	h := startServer(t, testConfig("least-request", newFake(t, "a")), scfg)
	smuggled := "GET /v1/models HTTP/1.1\r\nHost: router\r\n\r\n"
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"bad size", "zz\r\n{}\r\n0\r\n\r\n", http.StatusBadRequest},
		{"huge size", "ffffffffffffffff\r\n{}\r\n0\r\n\r\n", http.StatusRequestTimeout},
		{"missing CRLF", "2\r\n{}XX0\r\n\r\n", http.StatusBadRequest},
		{"size overflow", "1ffffffffffffffff\r\n{}\r\n0\r\n\r\n", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			head := "POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nTransfer-Encoding: chunked\r\n\r\n"
			if _, err := io.WriteString(c, head+tc.body+smuggled); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if status, body := readResponse(t, br); status != tc.status {
				t.Errorf("status %d %s, want %d", status, body, tc.status)
			}
			if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
				t.Errorf("after the error the connection gave %q (%v), want it closed", rest, err)
			}
		})
	}
}

// TestConnectionCap opens as many connections as the cap allows: the next one is answered
// 503 at once, and once they close the router serves again.
func TestConnectionCap(t *testing.T) {
	scfg := DefaultServerConfig()
	scfg.MaxConnections = 3
	h := startServer(t, testConfig("least-request", newFake(t, "a")), scfg)
	addr := strings.TrimPrefix(h.url, "http://")
	var held []net.Conn
	for range scfg.MaxConnections {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = over.SetDeadline(time.Now().Add(10 * time.Second))
	status, body := readResponse(t, bufio.NewReader(over))
	over.Close()
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"too_many_connections"`) {
		t.Errorf("over the cap: status %d body %q, want 503 too_many_connections", status, body)
	}
	for _, c := range held {
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.client.CloseIdleConnections()
		resp, err := h.client.Get(h.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router did not serve again after the connections closed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClientStopsReading streams to a client that stops reading: after the write timeout
// the router drops it, cancels the backend's request and releases its reservation.
func TestClientStopsReading(t *testing.T) {
	a := newFake(t, "a")
	a.flood, a.gone = true, make(chan struct{}, 1)
	scfg := DefaultServerConfig()
	scfg.WriteTimeout = 200 * time.Millisecond
	h := startServer(t, testConfig("least-request", a), scfg)
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := chatBody("x", true, "")
	if _, err := io.WriteString(c, rawRequest(len(body))+body); err != nil {
		t.Fatal(err)
	}
	select { // the client reads nothing
	case <-a.gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend still streams to a client that stopped reading")
	}
	h.waitHandled(t, 1)
	h.assertNoInFlight(t)
	if got := counterValue(t, h, "kvroute_gateway_requests_total", "status", "499"); got != 1 {
		t.Errorf("requests with status 499 = %v, want 1", got)
	}
}
