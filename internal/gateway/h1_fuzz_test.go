package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// readWhole reads a response head and its body with the proxy's parser, reading the body in
// steps of step bytes (at least 1).
func readWhole(raw []byte, step int) (*respHead, []byte, error) {
	br := bufio.NewReaderSize(bytes.NewReader(raw), 64)
	h := &respHead{}
	if err := h.read(br); err != nil {
		return nil, nil, err
	}
	var b body
	b.reset(br, h.mode, h.length)
	var out []byte
	buf := make([]byte, max(step, 1))
	for {
		n, err := b.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return h, out, nil
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// FuzzReadResponse checks the response parser against net/http's: whatever the proxy accepts,
// net/http accepts too, with the same status and body, and the same framing fields.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nTrailer: t\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 503 Service Unavailable\r\nConnection: close, X-Drop\r\nX-Drop: 1\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\nContent-Type: text/event-stream\n\ndata: x\n\n",
	} {
		f.Add([]byte(s), 7)
	}
	f.Fuzz(func(t *testing.T, raw []byte, step int) {
		h, got, err := readWhole(raw, step%97)
		if err != nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(raw))
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodPost})
		for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 { // interim: the Transport skips them
			resp, err = http.ReadResponse(br, &http.Request{Method: http.MethodPost})
		}
		if err != nil {
			t.Fatalf("the proxy accepts what net/http refuses (%v): %q", err, raw)
		}
		want, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("the proxy reads a body net/http cannot (%v): %q", err, raw)
		}
		if resp.StatusCode != h.status || !bytes.Equal(got, want) {
			t.Fatalf("status %d body %q, net/http %d %q: %q", h.status, got, resp.StatusCode, want, raw)
		}
		if wantClose := resp.Close || h.mode == bodyClose; h.close != wantClose {
			t.Fatalf("close %v, net/http %v: %q", h.close, wantClose, raw)
		}
		for _, fl := range h.fields {
			if strings.ContainsAny(fl.value, "\r\n\x00") || !slices.Contains(resp.Header.Values(fl.key), fl.value) {
				t.Fatalf("field %q: %q not in net/http's %v: %q", fl.key, fl.value, resp.Header, raw)
			}
		}
	})
}

// FuzzChunkedRoundTrip encodes data in chunks with net/http's chunked writer and decodes it
// with the proxy's body reader, read in steps of any size.
func FuzzChunkedRoundTrip(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(3), 5)
	f.Add([]byte{}, uint8(1), 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, step int) {
		var enc bytes.Buffer
		cw := httputil.NewChunkedWriter(&enc)
		for rest := data; len(rest) > 0; {
			n := min(len(rest), int(chunk)+1)
			if _, err := cw.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := cw.Close(); err != nil {
			t.Fatal(err)
		}
		enc.WriteString("\r\n")
		raw := append([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), enc.Bytes()...)
		_, got, err := readWhole(raw, step%4099)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("decoded %q (%v), want %q", got, err, data)
		}
	})
}

// FuzzReadRequestHead checks the request parser against net/http's: whatever the server
// accepts, net/http accepts too, with the same method, target, host, length and fields.
func FuzzReadRequestHead(f *testing.F) {
	for _, s := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nAuthorization: Bearer k\r\n\r\n{}",
		"GET /metrics?x=1 HTTP/1.1\r\nHost: a:8080\r\nAccept: */*\r\nAccept: text/plain\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"GET http://h/p HTTP/1.1\r\nHost: h\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var h reqHead
		var u url.URL
		r := &http.Request{Header: http.Header{}}
		if err := h.read(bufio.NewReaderSize(bytes.NewReader(raw), 256), r, &u, 4096); err != nil {
			return
		}
		want, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatalf("the server accepts what net/http refuses (%v): %q", err, raw)
		}
		if r.Method != want.Method || r.RequestURI != want.RequestURI || r.Host != want.Host ||
			r.ContentLength != want.ContentLength || r.Close != want.Close || r.URL.String() != want.URL.String() {
			t.Fatalf("got %s %s host %q len %d close %v, net/http %s %s host %q len %d close %v: %q", r.Method, r.RequestURI, r.Host,
				r.ContentLength, r.Close, want.Method, want.RequestURI, want.Host, want.ContentLength, want.Close, raw)
		}
		for k, vs := range r.Header {
			if k == "Transfer-Encoding" {
				continue
			}
			if strings.Join(vs, "\n") != strings.Join(want.Header[k], "\n") {
				t.Fatalf("field %s %q, net/http %q: %q", k, vs, want.Header[k], raw)
			}
		}
	})
}
