package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// echo is a handler for server tests: it answers with the method, target, Host, the body
// length and the body, and obeys a few request headers.
func echo(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Do") == "nocontent" { // answers without reading the body
		w.WriteHeader(http.StatusNoContent)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch r.Header.Get("X-Do") {
	case "stream": // three flushed chunks
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
		return
	case "big": // more than the server buffers, never flushed
		_, _ = w.Write([]byte(strings.Repeat("x", maxBuffered+10)))
		return
	case "short": // announces more than it sends
		w.Header().Set("Content-Length", "10")
		_, _ = w.Write([]byte("abc"))
		return
	case "abort": // a flushed start, then an aborted handler
		_, _ = w.Write([]byte("start"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("X-Host", r.Host)
	fmt.Fprintf(w, "%s %s %d %s", r.Method, r.RequestURI, len(body), body)
}

// rawConn dials a server and exchanges raw bytes with it.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatal(err)
	}
}

// read reads one response with net/http's parser: status, body and whether it was chunked
// and asked for the connection's close.
func (c *rawConn) read(method string) (status int, body string, chunked, closing bool, err error) {
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		return 0, "", false, false, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), len(resp.TransferEncoding) > 0, resp.Close, err
}

// closed reports whether the server closed the connection (or reset it), waiting for it.
func (c *rawConn) closed() bool {
	_, err := c.br.ReadByte()
	return err != nil && !isDeadline(err)
}

func TestServerProtocol(t *testing.T) {
	url := serveGateway(t, http.HandlerFunc(echo))
	post := func(target, extra, body string) string {
		return "POST " + target + " HTTP/1.1\r\nHost: h\r\n" + extra + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
	}
	type reply struct {
		status  int
		body    string // "" means not checked
		chunked bool
	}
	cases := []struct {
		name      string
		send      string
		method    string // of the requests sent, for reading the responses
		want      []reply
		wantClose bool // the server closes the connection after the replies
	}{
		{"keep-alive", post("/v1/completions", "", "ab") + post("/a?b=c", "", "xyz"), "POST",
			[]reply{{200, "POST /v1/completions 2 ab", false}, {200, "POST /a?b=c 3 xyz", false}}, false},
		{"chunked request body", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;e=1\r\nde\r\n0\r\nT: v\r\n\r\n", "POST",
			[]reply{{200, "POST /x 5 abcde", false}}, false},
		{"get without body", "GET /health HTTP/1.1\r\nHost: h\r\n\r\n", "GET", []reply{{200, "GET /health 0 ", false}}, false},
		{"head", "HEAD /x HTTP/1.1\r\nHost: h\r\n\r\n", "HEAD", []reply{{200, "", false}}, false},
		{"http/1.0 closes", "GET /old HTTP/1.0\r\n\r\n", "GET", []reply{{200, "GET /old 0 ", false}}, true},
		{"http/1.0 keep-alive", "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n", "GET",
			[]reply{{200, "GET /a 0 ", false}, {200, "GET /b 0 ", false}}, true},
		{"connection close", post("/x", "Connection: close\r\n", "q"), "POST", []reply{{200, "POST /x 1 q", false}}, true},
		{"streamed", post("/s", "X-Do: stream\r\n", ""), "POST", []reply{{200, "part0;part1;part2;", true}}, false},
		{"big response is chunked", post("/b", "X-Do: big\r\n", ""), "POST", []reply{{200, strings.Repeat("x", maxBuffered+10), true}}, false},
		{"no content", post("/n", "X-Do: nocontent\r\n", "") + post("/m", "", ""), "POST", []reply{{204, "", false}, {200, "POST /m 0 ", false}}, false},
		{"unread body drained", post("/n", "X-Do: nocontent\r\n", "unread") + post("/m", "", ""), "POST", []reply{{204, "", false}, {200, "POST /m 0 ", false}}, false},
		{"malformed request line", "POST /x\r\n\r\n", "POST", []reply{{400, "", false}}, true},
		{"missing host", "POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "POST", []reply{{400, "", false}}, true},
		{"bad version", "POST /x HTTP/2.0\r\nHost: h\r\n\r\n", "POST", []reply{{505, "", false}}, true},
		{"both lengths", "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "POST", []reply{{400, "", false}}, true},
		{"unknown coding", "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", "POST", []reply{{501, "", false}}, true},
		{"line too long", "GET /x HTTP/1.1\r\nHost: h\r\nX-Big: " + strings.Repeat("a", serverBufSize) + "\r\n\r\n", "GET", []reply{{431, "", false}}, true},
		{"head too large", "GET /x HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 1000)+"\r\n", 70) + "\r\n", "GET", []reply{{431, "", false}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, url)
			c.send(tc.send)
			for i, want := range tc.want {
				status, body, chunked, _, err := c.read(tc.method)
				if err != nil || status != want.status || (want.body != "" && body != want.body) || chunked != want.chunked {
					t.Fatalf("reply %d: status %d chunked %v body %q (%v), want %+v", i, status, chunked, body, err, want)
				}
			}
			if tc.wantClose {
				if !c.closed() {
					t.Error("connection left open")
				}
				return
			}
			c.send("GET /alive HTTP/1.1\r\nHost: h\r\n\r\n")
			if status, body, _, _, err := c.read("GET"); err != nil || status != 200 || body != "GET /alive 0 " {
				t.Errorf("next request on the connection: status %d body %q (%v)", status, body, err)
			}
		})
	}
}

// TestServerBrokenResponses checks that a response the handler cannot complete fails visibly:
// the connection closes before the body is whole.
func TestServerBrokenResponses(t *testing.T) {
	url := serveGateway(t, http.HandlerFunc(echo))
	for _, do := range []string{"short", "abort"} {
		t.Run(do, func(t *testing.T) {
			c := dialRaw(t, url)
			c.send("GET /x HTTP/1.1\r\nHost: h\r\nX-Do: " + do + "\r\n\r\n")
			if _, body, _, _, err := c.read("GET"); err == nil {
				t.Errorf("read a whole body %q from a broken response", body)
			}
		})
	}
}

func TestServerExpectContinue(t *testing.T) {
	url := serveGateway(t, http.HandlerFunc(echo))
	c := dialRaw(t, url)
	c.send("POST /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	if status, _, _, _, err := c.read("POST"); err != nil || status != http.StatusContinue {
		t.Fatalf("status %d (%v), want 100 before the body is sent", status, err)
	}
	c.send("abcd")
	if status, body, _, _, err := c.read("POST"); err != nil || status != 200 || body != "POST /e 4 abcd" {
		t.Errorf("status %d body %q (%v)", status, body, err)
	}
}

func TestServerReadHeaderTimeout(t *testing.T) {
	cfg := DefaultServerConfig()
	cfg.ReadHeaderTimeout = 50 * time.Millisecond
	srv, err := NewServer(cfg, http.HandlerFunc(echo), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := dialRaw(t, "http://"+ln.Addr().String())
	c.send("POST /x HTTP/1.1\r\nHost: h\r\n") // never finished
	if !c.closed() {
		t.Error("a head that never ends was not cut off")
	}
}

// TestServerClientGone checks that a handler's context ends when its client closes the
// connection, once the request has run for watchDelay.
func TestServerClientGone(t *testing.T) {
	gone := make(chan error, 1)
	url := serveGateway(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			gone <- nil
		case <-time.After(10 * time.Second):
			gone <- fmt.Errorf("context never ended")
		}
	}))
	c := dialRaw(t, url)
	c.send("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx")
	time.AfterFunc(2*watchDelay, func() { c.nc.Close() })
	if err := <-gone; err != nil {
		t.Error(err)
	}
}

// TestServerShutdown checks that Shutdown closes idle connections at once and lets a request
// in flight finish, then closes its connection.
func TestServerShutdown(t *testing.T) {
	release, entered := make(chan struct{}), make(chan struct{})
	srv, err := NewServer(DefaultServerConfig(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	idle, busy := dialRaw(t, url), dialRaw(t, url)
	idle.send("GET /fast HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, body, _, _, err := idle.read("GET"); err != nil || body != "done" {
		t.Fatalf("first request: %q %v", body, err)
	}
	busy.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	if !idle.closed() {
		t.Error("idle connection left open by Shutdown")
	}
	if err := <-served; err != http.ErrServerClosed {
		t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
	}
	close(release)
	_, body, _, closing, err := busy.read("GET")
	if err != nil || body != "done" || !closing {
		t.Errorf("request in flight: body %q close %v (%v), want it finished with Connection: close", body, closing, err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
