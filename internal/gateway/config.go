package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config configures a Gateway. Durations decode from strings such as "50ms" in YAML.
type Config struct {
	// Policy is the registry name of the routing policy ("prefix-score").
	Policy string `yaml:"policy" json:"policy"`
	// PolicyParams are the policy's parameters, keyed by its configuration's JSON tags; nil
	// means the policy's defaults.
	PolicyParams map[string]any `yaml:"policy_params" json:"policy_params"`
	// Seed seeds the policy's random source.
	Seed uint64 `yaml:"seed" json:"seed"`
	// Backends are the base URLs of the model servers ("http://10.0.0.1:8000"), unique.
	Backends []string `yaml:"backends" json:"backends"`
	// APIKeys, when not empty, are the bearer tokens clients must send on /v1/ paths.
	APIKeys []string `yaml:"api_keys" json:"api_keys"`
	// Health configures scraping and health checking.
	Health HealthConfig `yaml:"health" json:"health"`
	// Timeouts bound each attempt at a backend.
	Timeouts TimeoutsConfig `yaml:"timeouts" json:"timeouts"`
	// Limits bound request sizes and retries.
	Limits LimitsConfig `yaml:"limits" json:"limits"`
}

// HealthConfig configures the per-backend scrape loop, which is also the health check.
type HealthConfig struct {
	// ScrapeInterval is the time between scrapes of a ready backend's /metrics (50ms).
	ScrapeInterval time.Duration `yaml:"scrape_interval" json:"scrape_interval"`
	// ScrapeTimeout bounds one scrape (1s).
	ScrapeTimeout time.Duration `yaml:"scrape_timeout" json:"scrape_timeout"`
	// FailureThreshold is the number of consecutive failed scrapes that ejects a backend (3).
	FailureThreshold int `yaml:"failure_threshold" json:"failure_threshold"`
	// MaxBackoff caps the probe interval of an ejected backend, which doubles from
	// ScrapeInterval after each failed probe (2s).
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
}

// LimitsConfig bounds requests.
type LimitsConfig struct {
	// MaxBodyBytes is the largest request body accepted, in bytes (16 MiB); larger gets 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" json:"max_body_bytes"`
	// MaxRetries is how many other backends a request that failed before sending any byte to
	// the client is tried on (2).
	MaxRetries int `yaml:"max_retries" json:"max_retries"`
}

// DefaultConfig returns the defaults: policy prefix-score, no backends, no API keys, and the
// defaults documented on each field.
func DefaultConfig() Config {
	return Config{
		Policy: "prefix-score",
		Health: HealthConfig{
			ScrapeInterval: 50 * time.Millisecond, ScrapeTimeout: time.Second, FailureThreshold: 3,
			MaxBackoff: 2 * time.Second, ModelsInterval: 10 * time.Second,
		},
		Timeouts: TimeoutsConfig{Header: 300 * time.Second, FirstByte: 300 * time.Second, Idle: 60 * time.Second},
		Limits:   LimitsConfig{MaxBodyBytes: 16 << 20, MaxRetries: 2},
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
	for i, b := range c.Backends {
		id, err := normalizeURL(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("backends[%d]: %w", i, err))
			continue
		}
		if seen[id] {
			errs = append(errs, fmt.Errorf("backends[%d]: %s listed twice", i, id))
		}
		seen[id] = true
	}
	for i, k := range c.APIKeys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			errs = append(errs, fmt.Errorf("api_keys[%d]: empty or contains whitespace", i))
		}
	}
	errs = append(errs, c.Health.validate(), c.Timeouts.validate(), c.Limits.validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: config: %w", err)
	}
	return nil
}

func (h HealthConfig) validate() error {
	var errs []error
	positive(&errs, "health.scrape_interval", h.ScrapeInterval)
	positive(&errs, "health.scrape_timeout", h.ScrapeTimeout)
	positive(&errs, "health.models_interval", h.ModelsInterval)
	if h.MaxBackoff < h.ScrapeInterval {
		errs = append(errs, fmt.Errorf("health.max_backoff %v: want >= health.scrape_interval %v", h.MaxBackoff, h.ScrapeInterval))
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
	return errors.Join(errs...)
}

func positive(errs *[]error, name string, d time.Duration) {
	if d <= 0 {
		*errs = append(*errs, fmt.Errorf("%s %v: want > 0", name, d))
	}
}

// normalizeURL checks that s is an absolute http or https URL with a host and no query or
// fragment, and returns it without a trailing slash: the backend's ID.
func normalizeURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: want an http or https URL", s)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: want scheme://host[:port][/path] only", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
