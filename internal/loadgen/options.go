package loadgen

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Endpoint paths requests are sent to, relative to Options.Target.
const (
	ChatPath       = "/v1/chat/completions"
	CompletionPath = "/v1/completions"
)

// Response headers a kvroute router may set to say where and why it routed a request; Run
// copies them into Record.Endpoint and Record.Reason when present.
const (
	HeaderEndpoint = "X-Kvroute-Endpoint"
	HeaderReason   = "X-Kvroute-Reason"
	// HeaderEngineTTFT is the time to first token on the server engine's clock, in
	// seconds, that the emulator (internal/emulate.HeaderEngineTTFT) sets; Run copies it
	// into Result.EngineTTFT.
	HeaderEngineTTFT = "X-Kvroute-Engine-Ttft"
	// HeaderSession carries the workload's session id on every request.
	HeaderSession = "X-Session-Id"
)

// Options configures Run.
type Options struct {
	// Target is the base URL of the OpenAI-compatible server (a router or one replica), such
	// as "http://127.0.0.1:8080"; ChatPath and CompletionPath are appended to it.
	Target string
	// Model is the "model" field of every request body.
	Model string
	// Client sends the requests; nil means a client with no overall timeout whose transport
	// keeps enough idle connections for the load (RequestTimeout bounds each request).
	Client *http.Client
	// MaxConcurrency caps the requests in flight (vllm bench serve --max-concurrency); a
	// request over the cap waits for a slot, and its latencies are measured from when it is
	// sent. 0 means no cap.
	MaxConcurrency int
	// Warmup excludes the requests whose workload arrival is before it: they are sent, and
	// their sessions go on, but their Results have Warmup set. 0 records everything.
	Warmup time.Duration
	// RequestTimeout bounds each request from send to the end of its stream; a request
	// that runs over ends with results.StatusTimedOut. 0 means no limit.
	RequestTimeout time.Duration
}

// DefaultOptions returns options with no concurrency cap, no warm-up and a 10-minute
// per-request timeout; Target and Model are left for the caller.
func DefaultOptions() Options {
	return Options{RequestTimeout: 10 * time.Minute}
}

// Validate checks the target URL and that no limit is negative, joining every problem.
func (o Options) Validate() error {
	var errs []error
	if u, err := url.Parse(o.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("loadgen: target %q: want an http(s) URL with a host", o.Target))
	}
	if o.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("loadgen: max concurrency %d: want >= 0", o.MaxConcurrency))
	}
	if o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("loadgen: warm-up %v: want >= 0", o.Warmup))
	}
	if o.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("loadgen: request timeout %v: want >= 0", o.RequestTimeout))
	}
	return errors.Join(errs...)
}

// client returns o.Client, or a default one sized for the load.
func (o Options) client() *http.Client {
	if o.Client != nil {
		return o.Client
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0 // no limit
	tr.MaxIdleConnsPerHost = 1024
	if o.MaxConcurrency > 0 {
		tr.MaxIdleConnsPerHost = o.MaxConcurrency
	}
	return &http.Client{Transport: tr}
}
