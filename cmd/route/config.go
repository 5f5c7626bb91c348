package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"kvroute/internal/gateway"
	"kvroute/sweep"
)

// keysEnv is the environment variable that may hold the API keys, comma-separated: unlike a
// flag, it is not visible to other users in the process list.
const keysEnv = "KVROUTE_API_KEYS"

// fileConfig is the YAML configuration file: the process settings, the policy spec, the
// seed and the hardware in the shared vocabulary (docs/vocabulary.md), then the gateway's
// configuration (backends, api_keys, debug_headers, health, timeouts, limits, kv_events,
// tokenize) at the top level.
type fileConfig struct {
	// Policy is the routing policy: a name or {name: NAME, PARAM: VALUE, ...}, as a sweep
	// file's policies entries (default prefix-score). With pd.mode set it may take a sweep
	// file's P/D form, {name: LABEL, decider: SPEC, prefill: SPEC, decode: SPEC}; a plain
	// policy then routes both stages with the always decider.
	Policy sweep.PolicySpec `yaml:"policy"`
	// Seed is the master seed, as a sweep file's seed: the policy's random source is seeded
	// with sweep.RouterSeed(Seed), the seed the simulator gives a sweep's router, so the same
	// seed draws the same policy random stream in both.
	Seed uint64 `yaml:"seed"`
	// Catalog is an optional YAML or JSON file of extra GPUs and models (gpumodel's catalog
	// format), as a sweep file's catalog; hardware entries may name them.
	Catalog string `yaml:"catalog"`
	// Listen is the address the router serves on.
	Listen string `yaml:"listen"`
	// AdminListen, when set, is a second address that serves /health, /ready and /metrics
	// with no API key, for operators and Prometheus; /metrics then leaves the main address.
	AdminListen string `yaml:"admin_listen"`
	// Server bounds what clients may send, hold and take: read_header_timeout,
	// read_body_timeout, write_timeout, idle_timeout, max_header_bytes, max_connections,
	// max_connections_per_client.
	// Like the listen addresses, it takes a restart.
	Server gateway.ServerConfig `yaml:"server"`
	// APIKeysFile names a file of API keys, one a line (blank lines and lines starting with
	// # skipped); its keys join api_keys and those of $KVROUTE_API_KEYS. Re-read on SIGHUP.
	APIKeysFile string `yaml:"api_keys_file"`
	// DrainDelay is how long, after SIGTERM, /ready answers 503 while the router goes on
	// serving with its listener open, so that load balancers stop sending it clients first.
	DrainDelay time.Duration `yaml:"drain_delay"`
	// DrainTimeout bounds the whole drain: the delay, then the wait for requests in flight.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// Hardware gives, by backend name or URL, what a backend runs, with the keys of a sweep
	// file's fleet section less replicas ({gpu: H100-SXM-80GB, model: llama-3.1-8b, tp: 1,
	// gpu_memory_utilization: 0.9, ...}), for policies that predict latency from a step-time
	// model (predicted-ttft); backends left out are priced at the policy's fallback rate.
	Hardware map[string]sweep.ReplicaConfig `yaml:"hardware"`
	// deprecated lists the deprecated spellings the file and flags used, one warning each,
	// which the command logs once per load.
	deprecated []string
	// Gateway is the gateway's configuration.
	Gateway gateway.Config `yaml:",inline"`
}

func defaultFileConfig() fileConfig {
	g := gateway.DefaultConfig()
	return fileConfig{Policy: sweep.PolicySpec{Name: g.Policy}, Listen: "127.0.0.1:8080", Server: gateway.DefaultServerConfig(),
		DrainDelay: 5 * time.Second, DrainTimeout: 30 * time.Second, LogLevel: "info", Gateway: g}
}

// options are the command-line flags.
type options struct {
	fs              *flag.FlagSet
	config          string
	listen          string
	adminListen     string
	backends        string
	policy          string
	policyParams    string
	metricsInterval time.Duration
	apiKeysFile     string
	debugHeaders    bool
	seed            uint64
	logLevel        string
	drainDelay      time.Duration
	drainTimeout    time.Duration
	listPolicies    bool
	kvConnect       string
	kvReplay        string
	kvBind          string
	kvForward       string
	kvBootstrap     string
	tokenize        bool
	pdMode          string
	pdRoles         string
	getenv          func(string) string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	d := defaultFileConfig()
	o := &options{fs: flag.NewFlagSet("route", flag.ContinueOnError), getenv: os.Getenv}
	fs := o.fs
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "", "YAML configuration file; flags given explicitly override it; re-read on SIGHUP")
	fs.StringVar(&o.listen, "listen", d.Listen, "address to serve on")
	fs.StringVar(&o.adminListen, "admin-listen", "", "address serving /health, /ready and /metrics with no API key (empty: /metrics on -listen)")
	fs.StringVar(&o.backends, "backends", "", "comma-separated backends, URL or NAME=URL, e.g. gpu-a=http://10.0.0.1:8000,gpu-b=http://10.0.0.2:8000")
	fs.StringVar(&o.policy, "policy", d.Policy.Name, "routing policy: a name (-list-policies lists them) or, with parameters, the config file's form {name: NAME, PARAM: VALUE, ...} (YAML or JSON)")
	fs.StringVar(&o.policyParams, "policy-params", "", "deprecated, use -policy '{name: NAME, PARAM: VALUE}': the policy's parameters as a JSON object")
	fs.DurationVar(&o.metricsInterval, "metrics-interval", d.Gateway.Health.MetricsInterval, "interval between scrapes of each backend's /metrics (health.metrics_interval)")
	fs.DurationVar(&o.metricsInterval, "scrape-interval", d.Gateway.Health.MetricsInterval, "deprecated, use -metrics-interval")
	fs.StringVar(&o.apiKeysFile, "api-keys-file", "", "file of API keys clients must send as Authorization: Bearer, one a line (also $"+keysEnv+", comma-separated)")
	fs.BoolVar(&o.debugHeaders, "debug-headers", false, "add X-Kvroute-Endpoint (backend name) and X-Kvroute-Reason to responses")
	fs.Uint64Var(&o.seed, "seed", d.Seed, "master seed, as a sweep file's: the policy's random source is seeded with the router seed derived from it")
	fs.StringVar(&o.logLevel, "log-level", d.LogLevel, "debug, info, warn or error")
	fs.DurationVar(&o.drainDelay, "drain-delay", d.DrainDelay, "after SIGTERM, how long /ready answers 503 while the router keeps serving")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", d.DrainTimeout, "longest drain after SIGTERM, delay included")
	fs.BoolVar(&o.listPolicies, "list-policies", false, "print the routing policies and exit")
	fs.StringVar(&o.kvConnect, "kv-events-connect", "", "comma-separated vLLM KV-event publishers to dial, NAME=tcp://host:5557 (NAME: a backend's name or URL) or tcp://host:port (backend from the topic kv@<pod>@<model>)")
	fs.StringVar(&o.kvReplay, "kv-events-replay", "", "comma-separated replay endpoints, NAME=tcp://host:port, filling sequence gaps of that backend's stream")
	fs.StringVar(&o.kvBind, "kv-events-bind", "", "ZMQ endpoint to listen on for replicas that dial it (tcp://127.0.0.1:5557); only one process can bind it: a busy address stops the router")
	fs.StringVar(&o.kvForward, "kv-events-forward", "", "with -kv-events-bind: a PUB endpoint (tcp://0.0.0.0:5600) re-publishing every event received, for other routers' -kv-events-connect tcp://this-host:5600")
	fs.StringVar(&o.kvBootstrap, "kv-events-bootstrap-from", "", "comma-separated peer routers' admin URLs (http://router-0:9090): at start, load the first one's KV index snapshot (GET /kv/snapshot) before routing")
	fs.BoolVar(&o.tokenize, "tokenize", false, "fill request token ids from a backend's /tokenize (needed by precise-prefix)")
	fs.StringVar(&o.pdMode, "pd-mode", "", "route a prefill/decode fleet: two-step (the router runs vLLM's NIXL two-step) or sidecar (it sets llm-d's x-prefiller-host-port header for the decode backend's sidecar) (pd.mode)")
	fs.StringVar(&o.pdRoles, "pd-roles", "", "comma-separated backend roles, NAME=prefill or NAME=decode (NAME: a backend's name or URL); a backend left out is aggregated and decodes (pd.roles)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("route: unexpected arguments %v", fs.Args())
	}
	return o, nil
}

// load builds the configuration: defaults, then the file if any, then the flags that were
// given explicitly, then the API keys of api_keys_file and $KVROUTE_API_KEYS. It is called at
// start and on every SIGHUP.
func (o *options) load() (fileConfig, error) {
	c := defaultFileConfig()
	if o.config != "" {
		data, err := os.ReadFile(o.config)
		if err != nil {
			return c, fmt.Errorf("route: %w", err)
		}
		if err := decodeYAML(data, &c); err != nil {
			return c, fmt.Errorf("route: config %s: %w", o.config, err)
		}
	}
	var errs []error
	o.fs.Visit(func(f *flag.Flag) {
		if err := o.apply(f.Name, &c); err != nil {
			errs = append(errs, fmt.Errorf("-%s: %w", f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("route: flags: %w", err)
	}
	if err := o.addKeys(&c); err != nil {
		return c, err
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	if err := c.policyInto(&c.Gateway); err != nil {
		return c, err
	}
	c.Gateway.Seed = sweep.RouterSeed(c.Seed)
	cat, err := sweep.LoadCatalog(c.Catalog)
	if err != nil {
		return c, fmt.Errorf("route: catalog: %w", err)
	}
	prefill, err := prefillPredictors(cat, c.Hardware, c.Gateway.Backends)
	if err != nil {
		return c, err
	}
	c.Gateway.Prefill = prefill
	return c, c.Gateway.Validate()
}

// given reports whether flag name was set on the command line.
func (o *options) given(name string) bool {
	found := false
	o.fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// validate checks the process settings.
func (c fileConfig) validate() error {
	switch {
	case c.Listen == "":
		return errors.New("route: listen: required")
	case c.AdminListen != "" && c.AdminListen == c.Listen:
		return fmt.Errorf("route: admin_listen %s: want an address other than listen", c.AdminListen)
	case c.DrainDelay < 0:
		return fmt.Errorf("route: drain_delay %v: want >= 0", c.DrainDelay)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("route: drain_timeout %v: want > 0", c.DrainTimeout)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if err := c.Server.Validate(); err != nil {
		return fmt.Errorf("route: server: %w", err)
	}
	return nil
}

// addKeys adds the keys of the keys file and of the environment to c's.
func (o *options) addKeys(c *fileConfig) error {
	if c.APIKeysFile != "" {
		data, err := os.ReadFile(c.APIKeysFile)
		if err != nil {
			return fmt.Errorf("route: api_keys_file: %w", err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.ContainsAny(line, " \t") {
				return fmt.Errorf("route: api_keys_file %s line %d: a key holds whitespace", c.APIKeysFile, i+1)
			}
			c.Gateway.APIKeys = append(c.Gateway.APIKeys, line)
		}
	}
	c.Gateway.APIKeys = append(c.Gateway.APIKeys, splitList(o.getenv(keysEnv))...)
	return nil
}

// apply sets the configuration field of flag name from its value.
func (o *options) apply(name string, c *fileConfig) error {
	switch name {
	case "listen":
		c.Listen = o.listen
	case "admin-listen":
		c.AdminListen = o.adminListen
	case "backends":
		c.Gateway.Backends = splitList(o.backends)
	case "policy":
		spec, err := sweep.ParsePolicySpec([]byte(o.policy))
		if err != nil {
			return err
		}
		c.Policy = spec
	case "policy-params":
		params, err := sweep.ParsePolicyParams([]byte(o.policyParams))
		if err != nil && strings.TrimSpace(o.policyParams) != "" {
			return fmt.Errorf("want a JSON object: %w", err)
		}
		if o.given("policy") && len(c.Policy.Params) > 0 {
			return errors.New("-policy already gives the parameters")
		}
		c.Policy.Params = params
		c.deprecated = append(c.deprecated, "-policy-params is deprecated: use -policy '{name: NAME, PARAM: VALUE, ...}'")
	case "metrics-interval", "scrape-interval":
		if name == "scrape-interval" {
			if o.given("metrics-interval") {
				return errors.New("give -metrics-interval only; -scrape-interval is its deprecated spelling")
			}
			c.deprecated = append(c.deprecated, "-scrape-interval is deprecated: use -metrics-interval")
		}
		c.Gateway.Health.MetricsInterval = o.metricsInterval
	case "api-keys-file":
		c.APIKeysFile = o.apiKeysFile
	case "debug-headers":
		c.Gateway.DebugHeaders = o.debugHeaders
	case "seed":
		c.Seed = o.seed
	case "log-level":
		c.LogLevel = o.logLevel
	case "drain-delay":
		c.DrainDelay = o.drainDelay
	case "drain-timeout":
		c.DrainTimeout = o.drainTimeout
	case "kv-events-connect":
		c.Gateway.KVEvents.Connect = splitList(o.kvConnect)
	case "kv-events-replay":
		c.Gateway.KVEvents.Replay = splitList(o.kvReplay)
	case "kv-events-bind":
		c.Gateway.KVEvents.Bind = o.kvBind
	case "kv-events-forward":
		c.Gateway.KVEvents.Forward = o.kvForward
	case "kv-events-bootstrap-from":
		c.Gateway.KVEvents.BootstrapFrom = splitList(o.kvBootstrap)
	case "tokenize":
		c.Gateway.Tokenize.Remote = o.tokenize
	case "pd-mode":
		c.Gateway.PD.Mode = o.pdMode
	case "pd-roles":
		roles := map[string]string{}
		for _, kv := range splitList(o.pdRoles) {
			name, role, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				return fmt.Errorf("%q: want NAME=prefill or NAME=decode", kv)
			}
			roles[name] = role
		}
		c.Gateway.PD.Roles = roles
	}
	return nil
}

// policyInto fills the gateway's policy fields from the policy spec: a plain policy names
// the gateway's policy; a P/D spec names the decider and the stages' policies, and its
// decode policy stands as the gateway's policy.
func (c fileConfig) policyInto(g *gateway.Config) error {
	pd := c.Policy.PD
	g.Policy, g.PolicyParams = c.Policy.Name, c.Policy.Params
	if pd == nil {
		return nil
	}
	if !g.PD.On() {
		return fmt.Errorf("route: policy %s: a P/D policy (decider, prefill, decode) needs pd.mode", c.Policy.Name)
	}
	ref := func(s sweep.PolicySpec) gateway.PolicyRef { return gateway.PolicyRef{Name: s.Name, Params: s.Params} }
	g.PD.Name = c.Policy.Name
	g.PD.Decider, g.PD.Prefill, g.PD.Decode = ref(pd.Decider), ref(pd.Prefill), ref(pd.Decode)
	g.Policy, g.PolicyParams = pd.Decode.Name, pd.Decode.Params
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
