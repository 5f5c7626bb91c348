// Command emulate serves simulated vLLM replicas over HTTP: each is a sim/engine replica
// driven in wall-clock time behind vLLM's OpenAI API and /metrics, so the router and the load
// generator run end to end on a machine with no GPU. Replica i listens on host:(base-port+i).
//
//	go run ./cmd/emulate -replicas 4 -base-port 8001 -gpu H100-SXM-80GB -model llama-3.1-8b
//	go run ./cmd/emulate -speed 10 -admin-listen 127.0.0.1:9000   # 10x faster, admin API on :9000
//	go run ./cmd/emulate -fleet examples/tenant-flood.yaml         # the fleet a sweep file simulates
//
//	go run ./cmd/emulate -replicas 2 -kv-events-port 5557          # vLLM KV events on :5557, :5558
//
// Each replica serves POST /v1/chat/completions, /v1/completions and /tokenize, GET /v1/models,
// /health and /metrics, and failure injection under /admin/ (fail, recover, slow, errors). With
// -kv-events-port it publishes its prefix cache's changes as vLLM's KV events (ZMQ, msgpack). The
// -admin-listen server exposes the same under /replicas/{i}/admin/, reachable while a replica
// is down. SIGINT or SIGTERM stops every replica.
//
// The replicas are described with a sweep file's fleet keys (docs/vocabulary.md): -fleet FILE
// takes a sweep file's fleet section and catalog, and -replicas, -gpu, -model, -tp,
// -num-blocks, -gpu-memory-utilization, -quantization, -kv-cache-dtype,
// -max-num-batched-tokens, -max-num-seqs, -vllm and -catalog set (or override) one key each.
// The simulator's own resolver (sweep.ReplicaConfig.Engine) turns them into the replica.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvroute/internal/emulate"
	"kvroute/sim/cluster"
	"kvroute/sweep"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	replicas int
	host     string
	basePort int
	admin    string
	cfg      emulate.Config
	fleet    fleetFlags
	// deprecated lists the deprecated flags given, one warning each, logged at start.
	deprecated []string

	kvPort       int    // replica i binds its KV-event PUB socket on host:(kvPort+i)
	kvReplayPort int    // and its replay ROUTER on host:(kvReplayPort+i)
	kvDial       string // or every replica dials this endpoint (a router that binds)

	prefillReplicas int // the first this many replicas serve prefill legs, the others decode
	// pooled, for a split fleet file (fleet.pools or fleet.split), is each replica's pool
	// role and engine configuration, the pools' replicas in file order; nil otherwise.
	pooled []poolReplica
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o, fs := newFlags(stderr)
	if err := fs.Parse(args); err != nil {
		return *o, err
	}
	return o.check(fs)
}

// newFlags defines the flags on a new flag set that parses into the options it returns.
func newFlags(stderr io.Writer) (*options, *flag.FlagSet) {
	o := &options{cfg: emulate.DefaultConfig()}
	fs := flag.NewFlagSet("emulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.fleet.define(fs, sweep.FleetConfig{Replicas: 1, ReplicaConfig: sweep.ReplicaConfig{GPU: o.cfg.GPU, Model: o.cfg.Model, TP: o.cfg.TP}})
	fs.StringVar(&o.host, "host", "127.0.0.1", "address the replicas listen on")
	fs.IntVar(&o.basePort, "base-port", 8001, "port of replica 0; replica i listens on base-port+i (0: any free ports)")
	fs.StringVar(&o.admin, "admin-listen", "", "address of the fleet admin API, /replicas/{i}/admin/... (empty: none)")
	fs.StringVar(&o.admin, "admin-addr", "", "deprecated, use -admin-listen")
	fs.StringVar(&o.cfg.ServedModelName, "served-model-name", "", "model name listed by /v1/models (default: -model as given)")
	fs.Float64Var(&o.cfg.Speed, "speed", o.cfg.Speed, "speed-up over real time: 1 is real time, 10 makes steps take a tenth of their simulated time")
	fs.IntVar(&o.cfg.DefaultMaxTokens, "default-max-tokens", o.cfg.DefaultMaxTokens, "tokens generated when a request sends no max_tokens")
	fs.IntVar(&o.cfg.MaxTokensCap, "max-tokens-cap", o.cfg.MaxTokensCap, "largest max_tokens honoured; larger asks generate this many")
	fs.IntVar(&o.kvPort, "kv-events-port", 0, "publish KV events as vLLM does: replica i binds a ZMQ PUB on host:(port+i) (0: off)")
	fs.IntVar(&o.kvReplayPort, "kv-events-replay-port", 0, "replica i serves missed KV-event batches on a ZMQ ROUTER at host:(port+i) (0: off)")
	fs.StringVar(&o.kvDial, "kv-events-connect", "", "publish KV events by dialing this ZMQ endpoint (tcp://host:port), where a router binds")
	fs.BoolVar(&o.cfg.KVEvents.NamedFields, "kv-events-named", false, "encode KV events as named-field maps (vLLM PR #42892) instead of positional arrays")
	definePD(fs, o)
	return o, fs
}

// check resolves the fleet and checks the parsed flags.
func (o options) check(fs *flag.FlagSet) (options, error) {
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if err := o.fleet.resolve(fs, &o); err != nil {
		return o, errors.Join(append(errs, err)...)
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "admin-addr" {
			o.deprecated = append(o.deprecated, "-admin-addr is deprecated: use -admin-listen")
		}
	})
	if o.deprecated != nil && isSet(fs, "admin-listen") {
		errs = append(errs, errors.New("give -admin-listen only; -admin-addr is its deprecated spelling"))
	}
	if o.basePort < 0 || (o.basePort > 0 && o.basePort+o.replicas-1 > 65535) {
		errs = append(errs, fmt.Errorf("-base-port %d leaves no room for %d replicas", o.basePort, o.replicas))
	}
	if o.kvPort != 0 && o.kvDial != "" {
		errs = append(errs, errors.New("-kv-events-port and -kv-events-connect are exclusive"))
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"-kv-events-port", o.kvPort}, {"-kv-events-replay-port", o.kvReplayPort}} {
		if p.v < 0 || p.v+o.replicas-1 > 65535 {
			errs = append(errs, fmt.Errorf("%s %d leaves no room for %d replicas", p.name, p.v, o.replicas))
		}
	}
	if o.kvReplayPort > 0 && o.kvPort == 0 && o.kvDial == "" {
		errs = append(errs, errors.New("-kv-events-replay-port needs -kv-events-port or -kv-events-connect"))
	}
	errs = append(errs, o.checkPD(), o.cfg.Validate())
	return o, errors.Join(errs...)
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "emulate:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	for _, w := range o.deprecated {
		log.Warn("deprecated flag: see docs/vocabulary.md", "use", w)
	}
	reps, admin, err := start(ctx, o)
	if err != nil {
		log.Error("starting", "err", err)
		return 1
	}
	backends := make([]string, len(reps))
	for i, r := range reps {
		backends[i] = cluster.EndpointID(i) + "=http://" + r.Addr()
		log.Info("replica serving", "replica", cluster.EndpointID(i), "url", "http://"+r.Addr(), "gpu", o.cfg.GPU, "model", o.cfg.Model, "speed", o.cfg.Speed)
	}
	// The simulator's names for its replicas: the router given these backends decides on
	// the ids the simulation decided on.
	log.Info("for cmd/route", "backends", strings.Join(backends, ","))
	if roles := o.pdRoles(); roles != "" {
		log.Info("for cmd/route", "pd-roles", roles)
	}
	if admin != nil {
		log.Info("admin API serving", "url", "http://"+admin.Addr)
	}
	<-ctx.Done()
	log.Info("shutting down")
	code := 0
	if err := stop(reps, admin); err != nil {
		log.Error("stopping", "err", err)
		code = 1
	}
	return code
}

// start builds and starts the replicas and the admin server; on failure it stops what it
// started.
func start(ctx context.Context, o options) ([]*emulate.Replica, *http.Server, error) {
	var reps []*emulate.Replica
	for i := range o.replicas {
		cfg := o.cfg
		port := 0
		if o.basePort > 0 {
			port = o.basePort + i
		}
		cfg.Addr = net.JoinHostPort(o.host, strconv.Itoa(port))
		cfg.KVEvents = o.kvEvents(i)
		cfg.PD.Role = o.role(i)
		if ec := o.poolEngine(i); ec != nil {
			cfg.Deployment, cfg.Offload, cfg.TP, cfg.NumBlocks = &ec.Deployment, ec.Offload, ec.Deployment.TP, ec.NumBlocks
		}
		r, err := emulate.NewReplica(cfg)
		if err == nil {
			err = r.Start(ctx)
		}
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("replica %d: %w", i, err), stop(reps, nil))
		}
		reps = append(reps, r)
	}
	if o.admin == "" {
		return reps, nil, nil
	}
	ln, err := net.Listen("tcp", o.admin)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("admin: %w", err), stop(reps, nil))
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: adminMux(reps), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // returns ErrServerClosed when stop closes it
	return reps, srv, nil
}

// isSet reports whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// kvEvents is replica i's KV-event publishing configuration.
func (o options) kvEvents(i int) emulate.KVEventsConfig {
	kc := o.cfg.KVEvents
	switch {
	case o.kvPort > 0:
		kc.Endpoint, kc.Bind = "tcp://"+net.JoinHostPort(o.host, strconv.Itoa(o.kvPort+i)), true
	case o.kvDial != "":
		kc.Endpoint = o.kvDial
	default:
		return kc
	}
	if o.kvReplayPort > 0 {
		kc.ReplayEndpoint = "tcp://" + net.JoinHostPort(o.host, strconv.Itoa(o.kvReplayPort+i))
	}
	return kc
}

// adminMux serves each replica's admin API under /replicas/{i}/ and the list of replicas at
// GET /replicas.
func adminMux(reps []*emulate.Replica) *http.ServeMux {
	mux := http.NewServeMux()
	urls := make([]string, len(reps))
	for i, r := range reps {
		prefix := fmt.Sprintf("/replicas/%d", i)
		mux.Handle(prefix+"/admin/", http.StripPrefix(prefix, r.AdminHandler()))
		urls[i] = "http://" + r.Addr()
	}
	mux.HandleFunc("GET /replicas", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(urls) // a failed write means the client left
	})
	return mux
}

// stop closes the admin server and every replica.
func stop(reps []*emulate.Replica, admin *http.Server) error {
	var errs []error
	if admin != nil {
		errs = append(errs, admin.Close())
	}
	for i, r := range reps {
		if err := r.Close(); err != nil {
			errs = append(errs, fmt.Errorf("replica %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
