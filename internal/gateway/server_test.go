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

// TestTransferEncodingClosesConnection sends requests framed by Transfer-Encoding, one with a
// Content-Length too, each with a second request behind it that a proxy framing by
// Content-Length would not have seen as one. The handler gets the body as chunked framing
// gives it (net/http drops the Content-Length), and the connection closes after the answer:
// the second request never reaches the handler.
func TestTransferEncodingClosesConnection(t *testing.T) {
	for _, tc := range []struct{ name, head string }{
		{"content-length and chunked", "Content-Length: 41\r\nTransfer-Encoding: chunked\r\n"},
		{"chunked", "Transfer-Encoding: chunked\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct {
				path, body string
				te         []string
				length     int64
				header     bool // a Content-Length header reached the handler
			}
			got := make(chan seen, 2)
			url := serveGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				_, header := r.Header["Content-Length"]
				got <- seen{r.URL.Path, string(b), r.TransferEncoding, r.ContentLength, header}
				_, _ = io.WriteString(w, "ok")
			}), DefaultServerConfig())
			c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			req := "POST /first HTTP/1.1\r\nHost: router\r\n" + tc.head + "\r\n2\r\n{}\r\n0\r\n\r\n" +
				"GET /smuggled HTTP/1.1\r\nHost: router\r\n\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if status, _ := readResponse(t, br); status != http.StatusOK {
				t.Errorf("status %d, want 200", status)
			}
			if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
				t.Errorf("after the answer the connection gave %q (%v), want it closed", rest, err)
			}
			want := seen{"/first", "{}", []string{"chunked"}, -1, false}
			if s := <-got; s.path != want.path || s.body != want.body || len(s.te) != 1 || s.length != want.length || s.header {
				t.Errorf("handler saw %+v, want %+v", s, want)
			}
			select {
			case s := <-got:
				t.Errorf("the handler also got %s", s.path)
			default:
			}
		})
	}
}
