package gateway

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestOneClientCannotHoldTheCap has one client open as many connections as the server's cap
// and keep them: a second client is still served, whether the first client's connections
// are over its own cap (answered 503 at once) or, idle kept-alive connections within it,
// one is shed at the server's cap for the newcomer.
func TestOneClientCannotHoldTheCap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perClient int
		request   bool // the first client's connections each make a request and stay idle
		wantOK    int  // the first client's connections served
	}{
		{"idle keep-alives over the client's cap", 3, true, 3},
		{"silent connections over the client's cap", 3, false, 0},
		{"idle keep-alives shed at the cap", 6, true, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg := DefaultServerConfig()
			scfg.MaxConnections, scfg.MaxConnectionsPerClient = 6, tc.perClient
			h := startServer(t, testConfig("least-request", newFake(t, "a")), scfg)
			addr := strings.TrimPrefix(h.url, "http://")
			ok := 0
			for range scfg.MaxConnections {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				if !tc.request {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: router\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				if status, _ := readResponse(t, bufio.NewReader(c)); status == http.StatusOK {
					ok++
				}
			}
			if ok != tc.wantOK {
				t.Errorf("the first client's connections served %d, want %d", ok, tc.wantOK)
			}
			second := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialFrom("127.0.0.2")}}
			resp, err := second.Get(h.url + "/health")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("second client: status %d %s, want 200", resp.StatusCode, body)
			}
		})
	}
}

// dialFrom dials from the local address ip (any of 127.0.0.0/8 reaches loopback on Linux).
func dialFrom(ip string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return d.DialContext
}
