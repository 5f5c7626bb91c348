package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRequestHead checks the head sent to a backend: the backend's Host, the client's
// end-to-end fields only, and the body's length.
func TestRequestHead(t *testing.T) {
	up, err := newUpstream("http://10.0.0.1:8000/base", nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		header   http.Header
		dropAuth bool
		want     http.Header
	}{
		{"end-to-end kept", http.Header{"Content-Type": {"application/json"}, "X-Session-Id": {"s"}, "Accept": {"a", "b"}},
			false, http.Header{"Content-Type": {"application/json"}, "X-Session-Id": {"s"}, "Accept": {"a", "b"}}},
		{"hop-by-hop dropped", http.Header{"Connection": {"keep-alive, X-Hop"}, "X-Hop": {"1"}, "Keep-Alive": {"5"}, "Te": {"trailers"},
			"Upgrade": {"h2c"}, "Transfer-Encoding": {"chunked"}, "Proxy-Authorization": {"p"}, "X-Kept": {"k"}}, false, http.Header{"X-Kept": {"k"}}},
		{"gateway's own fields dropped", http.Header{"Content-Length": {"99"}, "Accept-Encoding": {"gzip"}, "Expect": {"100-continue"}, "Host": {"front"}},
			false, http.Header{}},
		{"authorization kept", http.Header{"Authorization": {"Bearer k"}}, false, http.Header{"Authorization": {"Bearer k"}}},
		{"authorization checked and dropped", http.Header{"Authorization": {"Bearer k"}}, true, http.Header{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			head := up.appendRequestHead(nil, up.chatPath, tc.header, tc.dropAuth, 3)
			r, err := http.ReadRequest(bufio.NewReader(io.MultiReader(bytes.NewReader(head), strings.NewReader("abc"))))
			if err != nil {
				t.Fatalf("%v: %q", err, head)
			}
			if r.Method != http.MethodPost || r.RequestURI != "/base/v1/chat/completions" || r.Host != "10.0.0.1:8000" || r.ContentLength != 3 {
				t.Errorf("%s %s host %q length %d", r.Method, r.RequestURI, r.Host, r.ContentLength)
			}
			r.Header.Del("Content-Length")
			if diff := cmp.Diff(tc.want, r.Header); diff != "" {
				t.Errorf("forwarded fields (-want +got):\n%s", diff)
			}
		})
	}
}

// closingBackend returns a fake whose server closes every connection as soon as it goes
// idle, as a backend's keep-alive timeout would; closed receives after each such close.
func closingBackend(t *testing.T, name string) (f *fake, closed chan struct{}) {
	t.Helper()
	f, closed = newFake(t, name), make(chan struct{}, 64)
	f.kill()
	f.connState = func(c net.Conn, s http.ConnState) {
		if s == http.StateIdle {
			c.Close()
			closed <- struct{}{}
		}
	}
	f.revive()
	return f, closed
}

// cannedScrapes answers the gateway's scrapes and model-list fetches in memory, so that a
// backend's server sees only the proxied requests.
type cannedScrapes struct{}

func (cannedScrapes) RoundTrip(r *http.Request) (*http.Response, error) {
	body := "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"
	if strings.HasSuffix(r.URL.Path, "/v1/models") {
		body = `{"object":"list","data":[{"id":"` + fakeModel + `","object":"model"}]}`
	}
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestStalePooledConnection checks that a pooled connection the backend closed while it was
// idle is replaced by a new one, transparently: no error, no retry elsewhere, no ejection.
func TestStalePooledConnection(t *testing.T) {
	a, closed := closingBackend(t, "a")
	reg := prometheus.NewRegistry()
	g, err := New(testConfig("least-request", a), Options{Transport: cannedScrapes{}, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	g.Probe(context.Background())
	url := serveGateway(t, g)
	for i := range 3 {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("x", i == 1, "")))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d %s", i, resp.StatusCode, body)
		}
		<-closed // the backend closed the connection the gateway pooled
	}
	if b := g.Backends()[0]; !b.Ready {
		t.Errorf("backend ejected by a stale connection: %+v", b)
	}
	if got := counterValue(t, &harness{reg: reg}, "kvroute_gateway_retries_total", "backend", a.url()); got != 0 {
		t.Errorf("retries = %v, want 0", got)
	}
}

// TestConnectionCloseNotPooled checks that a connection the backend announces it will close
// is not reused.
func TestConnectionCloseNotPooled(t *testing.T) {
	a := newFake(t, "a")
	a.mu.Lock()
	a.srv.Config.SetKeepAlivesEnabled(false) // every response says Connection: close
	a.mu.Unlock()
	h := start(t, testConfig("least-request", a))
	for i := range 3 {
		if r := h.post(t, "/v1/chat/completions", chatBody("x", false, "")); r.status != http.StatusOK {
			t.Fatalf("request %d: status %d %v", i, r.status, r.err)
		}
	}
	if n := len(h.g.current.Load().backends[0].up.idle); n != 0 {
		t.Errorf("%d connections pooled after Connection: close", n)
	}
}

// TestHTTPSBackend proxies to a TLS backend with the configured roots.
func TestHTTPSBackend(t *testing.T) {
	f := &fake{t: t, name: "tls", models: []string{fakeModel}}
	srv := httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(srv.Close)
	tlsConf := srv.Client().Transport.(*http.Transport).TLSClientConfig
	cfg := DefaultConfig()
	cfg.Backends = []string{srv.URL}
	g, err := New(cfg, Options{TLSClientConfig: tlsConf, Transport: &http.Transport{TLSClientConfig: tlsConf}})
	if err != nil {
		t.Fatal(err)
	}
	url := serveGateway(t, g)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("x", false, "")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Kvroute-Endpoint") != srv.URL || resp.Header.Get("X-Fake-Backend") != "tls" {
		t.Errorf("status %d endpoint %q: %s", resp.StatusCode, resp.Header.Get("X-Kvroute-Endpoint"), body)
	}
}

// TestPoolExpiry checks that idle connections older than the idle timeout are closed, not
// reused, and that a closed pool takes no connection back.
func TestPoolExpiry(t *testing.T) {
	up, err := newUpstream("http://127.0.0.1:1", &tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	conn := func() (*upConn, net.Conn) {
		a, b := net.Pipe()
		t.Cleanup(func() { b.Close() })
		return &upConn{nc: a}, b
	}
	isClosed := func(peer net.Conn) bool {
		_, err := peer.Read(make([]byte, 1))
		return err == io.EOF
	}
	old, oldPeer := conn()
	fresh, _ := conn()
	up.put(old)
	up.idle[0].idleAt = time.Now().Add(-upstreamIdleTimeout) // as if it had waited that long
	up.put(fresh)
	if got := up.pop(time.Now()); got != fresh {
		t.Error("pop did not return the fresh connection")
	}
	if got := up.pop(time.Now()); got != nil || !isClosed(oldPeer) {
		t.Errorf("pop returned %v; want the expired connection closed", got)
	}
	up.closeIdle()
	late, latePeer := conn()
	up.put(late)
	if len(up.idle) != 0 || !isClosed(latePeer) {
		t.Error("a closed pool kept a connection")
	}
}
