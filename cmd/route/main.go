// Command route is kvroute's production router: an OpenAI-compatible reverse proxy that routes
// each chat or completion request to one of several vLLM (or SGLang) replicas with one of the
// router package's policies, fed by the replicas' Prometheus metrics and its own in-flight
// accounting.
//
//	route -listen 127.0.0.1:8080 -backends http://a:8000,http://b:8000 -policy prefix-score
//	route -config route.yaml
//
// It serves POST /v1/chat/completions and /v1/completions, GET /v1/models, /health, /ready and
// its own Prometheus /metrics. SIGHUP re-reads the configuration (the file, then the flags
// given) without dropping requests in flight; SIGTERM or SIGINT stops accepting connections
// and waits up to the drain timeout for the requests in flight.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kvroute/internal/gateway"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(context.Background(), os.Args[1:], env{stderr: os.Stderr, signals: signals}))
}

// env is what run needs from its surroundings; tests fill it in.
type env struct {
	stderr  io.Writer
	signals <-chan os.Signal
	// listening, when set, is called with the address once the router serves.
	listening func(addr string)
	// reloaded, when set, is called after each SIGHUP with the reload's error.
	reloaded func(error)
}

// run runs the router until a terminating signal and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	o, err := parseFlags(args, e.stderr)
	if err != nil {
		return 2
	}
	cfg, err := o.load()
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return 2
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if err := serve(ctx, o, cfg, e, log); err != nil {
		log.Error("route stopped", "err", err)
		return 1
	}
	return 0
}

// serve builds the gateway, serves it, and handles signals until told to stop.
func serve(ctx context.Context, o *options, cfg fileConfig, e env, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	g, err := gateway.New(cfg.Gateway, gateway.Options{Metrics: reg, OnHealth: func(b string, ready bool, err error) {
		if ready {
			log.Info("backend admitted", "backend", b)
		} else {
			log.Warn("backend ejected", "backend", b, "err", err)
		}
	}})
	if err != nil {
		return err
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	probeCtx, cancelProbe := context.WithTimeout(runCtx, cfg.Gateway.Health.ScrapeTimeout)
	g.Probe(probeCtx) // know the backends' load and models before the first request
	cancelProbe()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = g.Run(runCtx)
	}()
	defer func() { stopRun(); <-ran }()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv, err := newServer(cfg.HTTPServer, cfg.Server, g, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "policy", cfg.Gateway.Policy, "backends", strings.Join(cfg.Gateway.Backends, ","))
	for _, b := range g.Backends() {
		log.Info("backend", "backend", b.URL, "ready", b.Ready, "models", b.Models, "err", b.LastError)
	}
	if e.listening != nil {
		e.listening(ln.Addr().String())
	}
	return loop(ctx, o, &cfg, g, srv, served, e, log)
}

// loop handles signals: SIGHUP reloads, anything else drains and returns.
func loop(ctx context.Context, o *options, cfg *fileConfig, g *gateway.Gateway, srv httpServer, served chan error, e env, log *slog.Logger) error {
	for {
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
			return shutdown(g, srv, cfg.DrainTimeout, log)
		case sig := <-e.signals:
			if sig != syscall.SIGHUP {
				log.Info("draining", "signal", sig.String(), "timeout", cfg.DrainTimeout)
				return shutdown(g, srv, cfg.DrainTimeout, log)
			}
			err := reload(o, cfg, g, log)
			if e.reloaded != nil {
				e.reloaded(err)
			}
		}
	}
}

func reload(o *options, cfg *fileConfig, g *gateway.Gateway, log *slog.Logger) error {
	next, err := o.load()
	if err == nil {
		err = g.Reload(next.Gateway)
	}
	if err != nil {
		log.Error("reload failed; keeping the running configuration", "err", err)
		return err
	}
	if next.Listen != cfg.Listen {
		log.Warn("listen address changes need a restart", "listening", cfg.Listen, "configured", next.Listen)
		next.Listen = cfg.Listen
	}
	if next.HTTPServer != cfg.HTTPServer || next.Server != cfg.Server {
		log.Warn("http_server and server changes need a restart", "running", fmt.Sprintf("%s %+v", cfg.HTTPServer, cfg.Server),
			"configured", fmt.Sprintf("%s %+v", next.HTTPServer, next.Server))
		next.HTTPServer, next.Server = cfg.HTTPServer, cfg.Server
	}
	*cfg = next
	log.Info("configuration reloaded", "policy", next.Gateway.Policy, "backends", strings.Join(next.Gateway.Backends, ","))
	return nil
}

// shutdown marks the gateway draining, stops accepting connections and waits for the
// requests in flight, up to timeout.
func shutdown(g *gateway.Gateway, srv httpServer, timeout time.Duration, log *slog.Logger) error {
	g.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("drain timed out; closing the remaining connections")
		return srv.Close()
	}
	log.Info("drained")
	return err
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("route: log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// httpServer is the front end serving the gateway: the gateway's own lean HTTP/1.1 server or
// net/http's, which has what the lean one leaves out (1xx responses, request trailers, header
// lines over 8 KB) at less throughput at high concurrency (README "The router in production").
type httpServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
}

// newServer returns the front end named by http_server ("lean" or "std") with cfg's limits.
func newServer(kind string, cfg gateway.ServerConfig, h http.Handler, log *slog.Logger) (httpServer, error) {
	if kind == "std" {
		return &http.Server{Handler: h, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
			MaxHeaderBytes: cfg.MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}, nil
	}
	return gateway.NewServer(cfg, h, func(err error) { log.Warn("server", "err", err) })
}
