// Command route is kvroute's production router: an OpenAI-compatible reverse proxy that routes
// each chat or completion request to one of several vLLM (or SGLang) replicas with one of the
// router package's policies, fed by the replicas' Prometheus metrics and its own in-flight
// accounting.
//
//	route -listen 127.0.0.1:8080 -backends a=http://a:8000,b=http://b:8000 -policy prefix-score
//	route -backends a=http://a:8000 -policy '{name: kv-router, overlap_score_credit: 1}' -seed 7
//	route -config route.yaml
//	KVROUTE_API_KEYS=k1,k2 route -config route.yaml -admin-listen 127.0.0.1:9090
//
// It serves POST /v1/chat/completions and /v1/completions, GET /v1/models, /health, /ready and
// its own Prometheus /metrics and KV-index /kv/snapshot (on -admin-listen when set). A
// KV-event endpoint it cannot bind stops it before it serves (exit 1). The policy spec, seed, metrics
// interval, retries, body limit and hardware use the names and decoders of sweep files
// (docs/vocabulary.md); deprecated spellings still work and are logged as warnings. SIGHUP re-reads the configuration
// (the file, then the flags given, then the API keys) without dropping requests in flight.
// SIGTERM or SIGINT drains: /ready answers 503 at once while the router keeps serving on its
// open listener for the drain delay and until nothing is in flight, then it stops accepting
// connections and waits for the last responses, all within the drain timeout.
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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"kvroute/internal/gateway"
	"kvroute/router"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(context.Background(), os.Args[1:], env{stdout: os.Stdout, stderr: os.Stderr, signals: signals}))
}

// env is what run needs from its surroundings; tests fill it in.
type env struct {
	stdout  io.Writer
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
	if o.listPolicies {
		listPolicies(e.stdout)
		return 0
	}
	cfg, err := o.load()
	if err != nil {
		fmt.Fprintln(e.stderr, err)
		return 2
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	warnDeprecated(log, cfg)
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
	g, err := gateway.New(cfg.Gateway, gateway.Options{Metrics: reg, OnHealth: func(name, url string, ready bool, err error) {
		if ready {
			log.Info("backend admitted", "backend", name, "url", url)
		} else {
			log.Warn("backend ejected", "backend", name, "url", url, "err", err)
		}
	}, OnKVError: func(err error) { log.Error("kv events", "err", err) }, OnKVBootstrap: func(b gateway.KVBootstrap) { logBootstrap(log, b) }})
	if err != nil {
		return err
	}
	if router.ReadsKVEvents(g.Policy()) && !cfg.Gateway.KVEvents.Enabled() {
		log.Warn("the policy reads the replicas' KV events: without kv_events it sees no cached prefix", "policy", cfg.Gateway.Policy)
	}
	if g.Tokenizes() {
		log.Info("filling request token ids from the backends' /tokenize", "policy", cfg.Gateway.Policy, "reads_tokens", router.ReadsTokens(g.Policy()))
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	probeCtx, cancelProbe := context.WithTimeout(runCtx, cfg.Gateway.Health.ScrapeTimeout)
	g.Probe(probeCtx) // know the backends' load and models before the first request
	cancelProbe()
	if err := g.StartKVEvents(runCtx); err != nil { // a busy bind address stops the router here
		return err
	}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = g.Run(runCtx)
	}()
	defer func() { stopRun(); <-ran }()

	cfg.Server.MaxConnections = capConnections(cfg.Server.MaxConnections, log)
	servers, served, err := listen(cfg, g, log)
	if err != nil {
		return err
	}
	for _, b := range g.Backends() {
		log.Info("backend", "backend", b.Name, "url", b.URL, "ready", b.Ready, "models", b.Models, "err", b.LastError)
	}
	if e.listening != nil {
		e.listening(servers[0].addr)
	}
	return loop(ctx, o, &cfg, g, servers, served, e, log)
}

// server is one listener and the Server on it.
type server struct {
	addr string
	srv  *gateway.Server
}

// listen serves g on cfg.Listen and, when set, the admin handler on cfg.AdminListen. The
// channel receives each server's Serve error.
func listen(cfg fileConfig, g *gateway.Gateway, log *slog.Logger) ([]server, chan error, error) {
	main := http.Handler(g)
	routes := []struct {
		addr string
		h    http.Handler
	}{{cfg.Listen, main}}
	if cfg.AdminListen != "" {
		routes[0].h = withoutMetrics(g)
		routes = append(routes, struct {
			addr string
			h    http.Handler
		}{cfg.AdminListen, g.AdminHandler()})
	}
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	var servers []server
	served := make(chan error, len(routes))
	for _, r := range routes {
		ln, err := net.Listen("tcp", r.addr)
		if err != nil {
			for _, s := range servers {
				_ = s.srv.Close()
			}
			return nil, nil, err
		}
		srv, err := gateway.NewServer(cfg.Server, r.h, errLog)
		if err != nil {
			_ = ln.Close()
			return nil, nil, err
		}
		servers = append(servers, server{ln.Addr().String(), srv})
		go func() { served <- srv.Serve(ln) }()
		log.Info("serving", "addr", ln.Addr().String(), "admin", r.addr == cfg.AdminListen, "policy", cfg.Policy.Name, "pd", cfg.Gateway.PD.Mode)
	}
	return servers, served, nil
}

// withoutMetrics serves h except /metrics and /kv/snapshot, which live on the admin listener.
func withoutMetrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" || r.URL.Path == "/kv/snapshot" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loop handles signals: SIGHUP reloads, anything else drains and returns.
func loop(ctx context.Context, o *options, cfg *fileConfig, g *gateway.Gateway, servers []server, served chan error, e env, log *slog.Logger) error {
	for {
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
			return shutdown(g, servers, cfg, log)
		case sig := <-e.signals:
			if sig != syscall.SIGHUP {
				log.Info("draining", "signal", sig.String(), "delay", cfg.DrainDelay, "timeout", cfg.DrainTimeout)
				return shutdown(g, servers, cfg, log)
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
	configured := next.Server // as serve lowers it to the file descriptor limit, quietly
	configured.MaxConnections = capConnections(configured.MaxConnections, slog.New(slog.DiscardHandler))
	if next.Listen != cfg.Listen || next.AdminListen != cfg.AdminListen || configured != cfg.Server {
		log.Warn("listen, admin_listen and server changes need a restart", "running", fmt.Sprintf("%s %s %+v", cfg.Listen, cfg.AdminListen, cfg.Server),
			"configured", fmt.Sprintf("%s %s %+v", next.Listen, next.AdminListen, next.Server))
	}
	next.Listen, next.AdminListen, next.Server = cfg.Listen, cfg.AdminListen, cfg.Server // the ones in force
	*cfg = next
	warnDeprecated(log, next)
	log.Info("configuration reloaded", "policy", next.Gateway.Policy, "backends", len(next.Gateway.Backends))
	return nil
}

// shutdown drains: /ready answers 503 at once, the listeners stay open for the drain delay
// and until no request is in flight, then they close and the last responses finish, all
// within the drain timeout, after which the remaining connections are closed.
func shutdown(g *gateway.Gateway, servers []server, cfg *fileConfig, log *slog.Logger) error {
	g.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout)
	defer cancel()
	delay, idle := time.After(cfg.DrainDelay), g.Idle()
	for delay != nil || idle != nil { // wait for both, or the timeout
		select {
		case <-delay:
			delay = nil
		case <-idle:
			idle = nil
		case <-ctx.Done():
			delay, idle = nil, nil
		}
	}
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.srv.Shutdown(ctx))
	}
	if ctx.Err() != nil {
		log.Warn("drain timed out; closing the remaining connections", "in_flight", g.InFlight())
		for _, s := range servers {
			_ = s.srv.Close()
		}
		return nil
	}
	log.Info("drained")
	return errors.Join(errs...)
}

// logBootstrap logs how loading a peer's KV index snapshot went.
func logBootstrap(log *slog.Logger, b gateway.KVBootstrap) {
	if b.Err != nil {
		log.Error("kv index bootstrap failed: routing starts from the events alone; backends whose history was missed are marked stale (kvroute_gateway_kv_index_stale)",
			"err", b.Err, "took", b.Took)
		return
	}
	log.Info("kv index bootstrapped", "peer", b.Peer, "backends", b.Backends, "blocks", b.Blocks, "took", b.Took)
}

// warnDeprecated logs, once per load, each deprecated spelling the configuration used.
func warnDeprecated(log *slog.Logger, c fileConfig) {
	for _, w := range c.deprecated {
		log.Warn("deprecated configuration: see docs/vocabulary.md", "use", w)
	}
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("route: log_level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// listPolicies prints the policies the router can run, one a line: name, the upstream source
// it reproduces, its rule.
func listPolicies(w io.Writer) {
	for _, info := range router.Builtin().Info() {
		fmt.Fprintln(w, info.String())
	}
}
