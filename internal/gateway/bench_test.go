package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"kvroute/internal/benchload"
)

// BenchmarkProxy compares requests sent straight to a backend with requests sent through the
// gateway (policy prefix-score, decision included), with a ~2 KB chat body, at concurrency 1
// and 64. "gateway" serves the gateway with its own Server, as cmd/route does;
// "gateway-nethttp" serves the same handler with net/http's server, for comparison; "tcp-relay"
// is the floor of any proxy on this setup: a byte relay that parses nothing and decides
// nothing, but makes the same socket calls; "epoll-relay" is that relay driven from one
// thread's epoll loop instead of goroutines (Linux only); "nginx" is nginx in front of the
// same backend, when it is installed, as the reference. Besides ns/op it reports the latency p50 and p99
// in µs and the throughput in req/s.
func BenchmarkProxy(b *testing.B) {
	be1, be2 := httptest.NewServer(benchload.Handler()), httptest.NewServer(benchload.Handler())
	defer be1.Close()
	defer be2.Close()
	cfg := DefaultConfig()
	cfg.Policy = "prefix-score"
	cfg.Backends = []string{be1.URL, be2.URL}
	g, err := New(cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Probe(ctx)
	go func() { _ = g.Run(ctx) }()
	front := serveGateway(b, g)
	netFront := httptest.NewServer(g)
	defer netFront.Close()
	relay := tcpRelay(b, be1.Listener.Addr().String())
	erelay := epollRelay(b, be1.Listener.Addr().String())
	ngx := benchload.Nginx(b, be1.Listener.Addr().String())

	body, client := benchload.ChatBody(), benchload.Client()
	for _, conc := range []int{1, 64} {
		for _, target := range []struct{ name, url string }{{"direct", be1.URL}, {"gateway", front}, {"gateway-nethttp", netFront.URL}, {"tcp-relay", relay}, {"epoll-relay", erelay}, {"nginx", ngx}} {
			if target.url == "" {
				continue
			}
			b.Run(fmt.Sprintf("c=%d/%s", conc, target.name), func(b *testing.B) {
				benchload.Run(b, client, target.url+"/v1/chat/completions", body, conc)
			})
		}
	}
}

// BenchmarkReadResponseHead parses a vLLM-like response head and its Content-Length body.
func BenchmarkReadResponseHead(b *testing.B) {
	raw := []byte("HTTP/1.1 200 OK\r\ndate: Sat, 22 Nov 2026 07:30:00 GMT\r\nserver: uvicorn\r\ncontent-length: 5\r\n" +
		"content-type: application/json\r\nx-request-id: 0123456789abcdef\r\n\r\nhello")
	rd := bytes.NewReader(raw)
	br := bufio.NewReaderSize(rd, upstreamBufSize)
	var h respHead
	var bd body
	buf := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(raw)
		br.Reset(rd)
		if err := h.read(br); err != nil {
			b.Fatal(err)
		}
		bd.reset(br, h.mode, h.length)
		if n, err := bd.Read(buf); n != 5 || err != io.EOF {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkReadRequestHead parses the head of a typical client request.
func BenchmarkReadRequestHead(b *testing.B) {
	raw := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: 2048\r\nAuthorization: Bearer sk-0123456789\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n")
	rd := bytes.NewReader(raw)
	br := bufio.NewReaderSize(rd, serverBufSize)
	var h reqHead
	var u url.URL
	r := &http.Request{Header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(raw)
		br.Reset(rd)
		clear(r.Header)
		if err := h.read(br, r, &u, 64<<10); err != nil {
			b.Fatal(err)
		}
	}
}

// tcpRelay serves a byte relay to backend on a loopback port: one backend connection per
// client connection, copied both ways. It returns the relay's base URL.
func tcpRelay(b *testing.B, backend string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}
