package gateway

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"strings"
	"time"

	"kvroute/internal/openai"
	"kvroute/router"
)

// Config configures a Gateway. Durations decode from strings such as "50ms" in YAML. The
// policy and its seed are plain values with no YAML keys: cmd/route decodes its config's
// policy spec and master seed with the decoder the simulator uses (package sweep, which this
// package may not import) and fills them in.
type Config struct {
	// Policy is the registry name of the routing policy ("prefix-score").
	Policy string `yaml:"-" json:"-"`
	// PolicyParams are the policy's parameters, keyed by its configuration's JSON tags; nil
	// means the policy's defaults.
	PolicyParams map[string]any `yaml:"-" json:"-"`
	// Seed seeds the policy's random source as given. cmd/route derives it from its master
	// seed as the simulator derives a router's seed from a sweep's (sweep.RouterSeed).
	Seed uint64 `yaml:"-" json:"-"`
	// Backends are the model servers, each its base URL ("http://10.0.0.1:8000") or
	// NAME=URL ("gpu-a=http://10.0.0.1:8000"). The name is all clients and metrics labels
	// ever show of a backend (URLs stay private); it defaults to "backend-" and 8 hex digits
	// of a hash of the URL, which stays the same when the list is edited. URLs and names are
	// unique.
	Backends []string `yaml:"backends" json:"backends"`
	// APIKeys, when not empty, are the bearer tokens clients must send on /v1/ paths and
	// /metrics.
	APIKeys []string `yaml:"api_keys" json:"api_keys"`
	// DebugHeaders adds X-Kvroute-Endpoint (the backend's name) and X-Kvroute-Reason (the
	// policy's decision branch) to responses, for load generators that record them (false:
	// clients learn nothing of the fleet behind the router).
	DebugHeaders bool `yaml:"debug_headers" json:"debug_headers"`
	// Health configures scraping and health checking.
	Health HealthConfig `yaml:"health" json:"health"`
	// Timeouts bound each attempt at a backend.
	Timeouts TimeoutsConfig `yaml:"timeouts" json:"timeouts"`
	// Limits bound request sizes and retries.
	Limits LimitsConfig `yaml:"limits" json:"limits"`
	// Prefill gives, by backend name or URL, the step-time model of the backend's GPU and
	// model (router.EndpointState.Prefill, read by predicted-ttft). cmd/route fills it from
	// its hardware section; the gateway does not import gpumodel.
	Prefill map[string]router.PrefillPredictor `yaml:"-" json:"-"`
	// KVEvents subscribes to the backends' KV events; a reload applies it (all but block_size).
	KVEvents KVEventsConfig `yaml:"kv_events" json:"kv_events"`
	// Tokenize fills requests' token ids from the backends' /tokenize.
	Tokenize TokenizeConfig `yaml:"tokenize" json:"tokenize"`
	// PD splits the backends into prefill and decode pools and says who runs vLLM's NIXL
	// two-step; absent, the backends are one aggregated pool.
	PD PDConfig `yaml:"pd" json:"pd"`
}

// HealthConfig configures the per-backend scrape loop, which is also the health check.
type HealthConfig struct {
	// MetricsInterval is the time between scrapes of a ready backend's /metrics (50ms): the
	// metrics_interval of the shared vocabulary (docs/vocabulary.md), the sweep files'
	// router.metrics_interval.
	MetricsInterval time.Duration `yaml:"metrics_interval" json:"metrics_interval"`
	// ScrapeTimeout bounds one scrape (1s).
	ScrapeTimeout time.Duration `yaml:"scrape_timeout" json:"scrape_timeout"`
	// FailureThreshold is the number of consecutive failed scrapes that ejects a backend (3).
	FailureThreshold int `yaml:"failure_threshold" json:"failure_threshold"`
	// MaxBackoff caps the probe interval of an ejected backend, which doubles from
	// MetricsInterval after each failed probe (2s).
	MaxBackoff time.Duration `yaml:"max_backoff" json:"max_backoff"`
	// ModelsInterval is the time between fetches of a backend's /v1/models (10s); the list is
	// also fetched on a backend's first good scrape and on re-admission.
	ModelsInterval time.Duration `yaml:"models_interval" json:"models_interval"`
}

// TimeoutsConfig bounds the phases of one attempt at a backend.
type TimeoutsConfig struct {
	// Header is the longest wait from sending a request to the response headers (300s; a
	// non-streamed completion sends its headers only when it is done).
	Header time.Duration `yaml:"header" json:"header"`
	// FirstByte is the longest wait from the headers to the first byte of the body (300s).
	FirstByte time.Duration `yaml:"first_byte" json:"first_byte"`
	// Idle is the longest gap between two reads of the body after the first (60s).
	Idle time.Duration `yaml:"idle" json:"idle"`
	// Request bounds a whole request, from its arrival to the end of its response, retries
	// included (30m); a stream cut by it ends with a backend_timeout error event.
	Request time.Duration `yaml:"request" json:"request"`
}

// LimitsConfig bounds requests and states the failure rule: a request whose attempt at a
// backend failed before any byte of the response reached the client, in a class RetryOn
// names, is tried on another backend, up to MaxRetries times; once a response head reached
// the client, never.
type LimitsConfig struct {
	// MaxBodyBytes is the largest request body accepted, in bytes (openai.DefaultMaxBodyBytes,
	// 16 MiB, as the emulator); larger gets 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxRetries is how many other backends a request is tried on after failures the rule
	// retries (2). A backend a request failed on is not tried again for it. 0 means never:
	// no backend receives a request twice, and no two backends receive it.
	MaxRetries int `yaml:"max_retries" json:"max_retries"`
	// RetryOn names the failure classes retried: "connect" (the connection could not be
	// made: nothing was sent), "reset" (the connection was reset or closed before a response
	// head: the backend may have received the request, which for LLM generation has no side
	// effect), "busy" (the backend answered 503 or 429) and "header_timeout" (no response head
	// within timeouts.header). Nil means all four; [connect, busy] retries only requests no
	// backend accepted. A request past timeouts.request is never retried.
	RetryOn []string `yaml:"retry_on" json:"retry_on"`
}

// DefaultConfig returns the defaults: policy prefix-score, no backends, no API keys, and the
// defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		Policy: "prefix-score",
		Health: HealthConfig{
			MetricsInterval: 50 * time.Millisecond, ScrapeTimeout: time.Second, FailureThreshold: 3,
			MaxBackoff: 2 * time.Second, ModelsInterval: 10 * time.Second,
		},
		Timeouts: TimeoutsConfig{Header: 300 * time.Second, FirstByte: 300 * time.Second, Idle: 60 * time.Second, Request: 30 * time.Minute},
		Limits:   LimitsConfig{MaxBodyBytes: openai.DefaultMaxBodyBytes, MaxRetries: router.DefaultMaxRetries},
		KVEvents: KVEventsConfig{BlockSize: 16, BootstrapTimeout: 5 * time.Second},
		Tokenize: DefaultTokenizeConfig(),
	}
}

// maxRetries bounds LimitsConfig.MaxRetries.
const maxRetries = 16

// Validate checks every field and returns all problems joined, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Policy == "" {
		errs = append(errs, errors.New("policy: required"))
	}
	if len(c.Backends) == 0 {
		errs = append(errs, errors.New("backends: at least one required"))
	}
	seen := map[string]bool{}
	var specs []backendSpec
	for i, b := range c.Backends {
		spec, err := parseBackend(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("backends[%d]: %w", i, err))
			continue
		}
		specs = append(specs, spec)
		for _, k := range []string{"url " + spec.url, "name " + spec.name} {
			if seen[k] {
				errs = append(errs, fmt.Errorf("backends[%d]: %s listed twice", i, k))
			}
			seen[k] = true
		}
	}
	for i, k := range c.APIKeys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			errs = append(errs, fmt.Errorf("api_keys[%d]: empty or contains whitespace", i))
		}
	}
	errs = append(errs, c.Health.validate(), c.Timeouts.validate(), c.Limits.validate(),
		c.KVEvents.validate(specs), c.Tokenize.validate(), c.PD.validate(specs))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: config: %w", err)
	}
	return nil
}

func (h HealthConfig) validate() error {
	var errs []error
	positive(&errs, "health.metrics_interval", h.MetricsInterval)
	positive(&errs, "health.scrape_timeout", h.ScrapeTimeout)
	positive(&errs, "health.models_interval", h.ModelsInterval)
	if h.MaxBackoff < h.MetricsInterval {
		errs = append(errs, fmt.Errorf("health.max_backoff %v: want >= health.metrics_interval %v", h.MaxBackoff, h.MetricsInterval))
	}
	if h.FailureThreshold < 1 {
		errs = append(errs, fmt.Errorf("health.failure_threshold %d: want >= 1", h.FailureThreshold))
	}
	return errors.Join(errs...)
}

func (t TimeoutsConfig) validate() error {
	var errs []error
	positive(&errs, "timeouts.header", t.Header)
	positive(&errs, "timeouts.first_byte", t.FirstByte)
	positive(&errs, "timeouts.idle", t.Idle)
	positive(&errs, "timeouts.request", t.Request)
	return errors.Join(errs...)
}

func (l LimitsConfig) validate() error {
	var errs []error
	if l.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("limits.max_body_bytes %d: want > 0", l.MaxBodyBytes))
	}
	if l.MaxRetries < 0 || l.MaxRetries > maxRetries {
		errs = append(errs, fmt.Errorf("limits.max_retries %d: want 0..%d", l.MaxRetries, maxRetries))
	}
	errs = append(errs, l.validateRetryOn())
	return errors.Join(errs...)
}

func positive(errs *[]error, name string, d time.Duration) {
	if d <= 0 {
		*errs = append(*errs, fmt.Errorf("%s %v: want > 0", name, d))
	}
}

// backendSpec is one entry of Config.Backends.
type backendSpec struct {
	name string // as configured, or backend-N
	url  string // normalized: the policy's endpoint ID
}

// parseBackend parses an entry of Config.Backends: URL or NAME=URL.
func parseBackend(s string) (backendSpec, error) {
	name, raw, named := strings.Cut(s, "=")
	if !named || strings.Contains(name, "://") {
		name, raw = "", s
	} else if !validName(name) {
		return backendSpec{}, fmt.Errorf("name %q: want 1-64 letters, digits, '.', '_' or '-'", name)
	}
	u, err := normalizeURL(raw)
	if err != nil {
		return backendSpec{}, err
	}
	if name == "" {
		h := fnv.New32a()
		_, _ = h.Write([]byte(u))
		name = fmt.Sprintf("backend-%08x", h.Sum32())
	}
	return backendSpec{name: name, url: u}, nil
}

// validName reports whether s can name a backend: it goes into headers and metric labels.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// normalizeURL checks that s is an absolute http or https URL with a host and no userinfo,
// query or fragment, and returns it without a trailing slash: the backend's ID. Its errors
// show s without userinfo, query or fragment, which may hold secrets.
func normalizeURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL
		}
		return "", fmt.Errorf("%q: %v", redactURL(s), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want an http or https URL", redactURL(s))
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want scheme://host[:port][/path] only", redactURL(s))
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// redactURL returns s with its userinfo, query and fragment, if any, each replaced by
// "REDACTED". It does not need s to parse.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	} else {
		scheme += "://"
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		authority = "REDACTED@" + authority[i+1:]
	}
	if i := strings.IndexAny(tail, "?#"); i >= 0 {
		tail = tail[:i+1] + "REDACTED"
	}
	return scheme + authority + tail
}
