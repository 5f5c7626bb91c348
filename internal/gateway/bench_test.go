package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"testing"

	"kvroute/internal/benchtest"
)

// BenchmarkProxy compares requests sent straight to a backend ("direct") with requests sent
// through the gateway (policy prefix-score, decision included, served by Server as cmd/route
// serves it), for chat bodies of 2 KB, 32 KB and 220 KB at concurrency 1, 64 and 150.
// "tcp-relay" is the floor of any proxy on this setup: a byte relay that parses and decides
// nothing but makes the same socket calls; "nginx" is nginx in front of the same backend,
// when it is installed, as the reference. Besides ns/op it reports the latency p50 and p99 in
// µs, the throughput in req/s and this process's CPU time per request (client, backend and
// gateway together: the gateway's share is the difference from "direct"; nginx runs in a
// process of its own, which it does not count). cmd/route's BenchmarkProcesses measures the
// router's CPU alone.
func BenchmarkProxy(b *testing.B) {
	be1, be2 := httptest.NewServer(benchtest.Handler()), httptest.NewServer(benchtest.Handler())
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
	front := serveGateway(b, g, DefaultServerConfig())
	relay := tcpRelay(b, be1.Listener.Addr().String())
	ngx, _ := benchtest.Nginx(b, be1.Listener.Addr().String())

	client := benchtest.Client()
	for _, size := range benchtest.Sizes {
		body := benchtest.ChatBody(size)
		for _, conc := range []int{1, 64, 150} {
			for _, target := range []struct{ name, url string }{{"direct", be1.URL}, {"gateway", front}, {"tcp-relay", relay}, {"nginx", ngx}} {
				if target.url == "" {
					continue
				}
				b.Run(fmt.Sprintf("size=%dK/c=%d/%s", size>>10, conc, target.name), func(b *testing.B) {
					benchtest.Run(b, client, target.url+"/v1/chat/completions", body, conc, benchtest.SelfCPU)
				})
			}
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
