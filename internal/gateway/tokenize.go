package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"

	"kvroute/router"
)

// TokenizeConfig is how the gateway fills each request's token ids (router.Request.Tokens)
// from a backend's POST /tokenize, as the engine forms them (chat template included), as
// llm-d's token-producer does. It does so whenever the policy reads token ids
// (router.ReadsTokens: kv-router, predicted-ttft, precise-prefix, token-load, vtc-basic,
// prefix-score's llm-d variant), and for any policy with Remote. A request whose ids could
// not be had is routed without them (its prefix score is 0); it is never refused for it.
type TokenizeConfig struct {
	// Remote asks a ready backend's /tokenize for every request without token ids, whatever
	// the policy.
	Remote bool `yaml:"remote" json:"remote"`
	// CacheEntries bounds the cache of prompts already tokenized (4,096; 0 disables it).
	// Read at New.
	CacheEntries int `yaml:"cache_entries" json:"cache_entries"`
	// CacheBytes bounds what the cache holds, in bytes: 4 per token id plus 128 per prompt
	// (64 MiB, about 16M ids). Read at New.
	CacheBytes int64 `yaml:"cache_bytes" json:"cache_bytes"`
	// MaxTokens caps a prompt's token ids (262,144); the backend's max_model_len, which
	// vLLM's /tokenize answers with, lowers it. An answer over the cap is not used (the
	// request is routed without ids, and the prompt is not asked again for Cooldown), and an
	// answer is read only as far as the cap allows: 12 bytes an id plus 64 KiB.
	MaxTokens int `yaml:"max_tokens" json:"max_tokens"`
	// Timeout bounds one /tokenize call (2s). A request tries at most two backends'
	// tokenizers, each for Timeout.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
	// Cooldown is how long a backend whose /tokenize failed (an error, a status other than
	// 200, an answer that does not parse, Timeout) is not asked (10s); then one request asks
	// it again.
	Cooldown time.Duration `yaml:"cooldown" json:"cooldown"`
}

// DefaultTokenizeConfig returns the defaults documented on each field.
func DefaultTokenizeConfig() TokenizeConfig {
	return TokenizeConfig{CacheEntries: 4096, CacheBytes: 64 << 20, MaxTokens: 1 << 18, Timeout: 2 * time.Second, Cooldown: 10 * time.Second}
}

// maxTokenizeTokens bounds TokenizeConfig.MaxTokens: 4M ids read as up to 48 MiB of JSON.
const maxTokenizeTokens = 1 << 22

func (c TokenizeConfig) validate() error {
	var errs []error
	if c.CacheEntries < 0 {
		errs = append(errs, fmt.Errorf("tokenize.cache_entries %d: want >= 0", c.CacheEntries))
	}
	if c.Remote && c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("tokenize.timeout %v: want > 0", c.Timeout))
	}
	if c.CacheEntries > 0 && c.CacheBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("tokenize.cache_bytes %d: want >= 1024 while tokenize.cache_entries > 0", c.CacheBytes))
	}
	if c.MaxTokens < 1 || c.MaxTokens > maxTokenizeTokens {
		errs = append(errs, fmt.Errorf("tokenize.max_tokens %d: want 1..%d", c.MaxTokens, maxTokenizeTokens))
	}
	if c.Cooldown <= 0 {
		errs = append(errs, fmt.Errorf("tokenize.cooldown %v: want > 0", c.Cooldown))
	}
	return errors.Join(errs...)
}

// tokenizer asks backends' /tokenize. It keeps a cache of ids bounded in entries and bytes,
// the prompts whose ids were over the cap, and each backend's tokenizer health.
type tokenizer struct {
	client  *http.Client
	cache   *idCache // nil: no cache
	next    atomic.Uint64
	metrics *metrics

	mu      sync.Mutex
	health  map[string]*tokenizerHealth       // by backend name
	tooLong *simplelru.LRU[uint64, time.Time] // prompt keys over the cap, until when
}

// tokenizerHealth is what the gateway knows of one backend's /tokenize. Guarded by
// tokenizer.mu.
type tokenizerHealth struct {
	skipUntil   time.Time // not asked before then: cooling down, or being probed
	maxModelLen int       // as its last answer gave it; 0 when unknown
}

// maxTooLong bounds the prompts remembered as over the cap.
const maxTooLong = 1024

func newTokenizer(c TokenizeConfig, rt http.RoundTripper, m *metrics) (*tokenizer, error) {
	t := &tokenizer{client: &http.Client{Transport: rt}, metrics: m, health: map[string]*tokenizerHealth{}}
	var err error
	if c.CacheEntries > 0 {
		if t.cache, err = newIDCache(c.CacheEntries, c.CacheBytes); err != nil {
			return nil, err
		}
	}
	if t.tooLong, err = simplelru.NewLRU[uint64, time.Time](maxTooLong, nil); err != nil {
		return nil, err
	}
	return t, nil
}

// tokenizeBody is vLLM's TokenizeCompletionRequest or TokenizeChatRequest
// (vllm/entrypoints/openai/protocol.py): model plus prompt, or model plus messages with
// add_generation_prompt, which the chat completion itself applies.
type tokenizeBody struct {
	Model               string        `json:"model,omitempty"`
	Prompt              *string       `json:"prompt,omitempty"`
	Messages            []wireMessage `json:"messages,omitempty"`
	AddGenerationPrompt *bool         `json:"add_generation_prompt,omitempty"`
}

type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Results of fillTokens, the result label of kvroute_gateway_tokenize_duration_seconds.
const (
	tokHit         = "hit"         // from the cache
	tokMiss        = "miss"        // from a backend's /tokenize
	tokError       = "error"       // the backends asked failed
	tokTooLong     = "too_long"    // over the cap: now, or within the cooldown
	tokUnavailable = "unavailable" // no ready backend's tokenizer to ask
)

// fillTokens sets req.Tokens from the cache or the /tokenize of one ready backend, or of a
// second when the first fails, skipping backends whose tokenizer is cooling down. It
// returns the result for the metrics; on any result but hit and miss, req is left as it was.
func (g *Gateway) fillTokens(ctx context.Context, st *state, req *router.Request) string {
	raw, err := json.Marshal(newTokenizeBody(req))
	if err != nil {
		return tokError
	}
	t, cfg, key := g.tok, st.cfg.Tokenize, xxhash.Sum64(raw)
	if t.cache != nil {
		if ids, ok := t.cache.get(key); ok {
			req.Tokens, req.InputTokens = ids, len(ids)
			return tokHit
		}
	}
	now := time.Now()
	if t.knownTooLong(key, now) {
		return tokTooLong
	}
	result, asked := tokUnavailable, 0
	for _, b := range g.readyBackends(st) {
		if asked == 2 {
			break
		}
		if !t.claim(b, time.Now(), cfg.Timeout) {
			continue
		}
		asked++
		ids, err := t.ask(ctx, b, raw, cfg)
		if err == nil {
			if t.cache != nil {
				t.cache.add(key, ids)
			}
			req.Tokens, req.InputTokens = ids, len(ids)
			return tokMiss
		}
		if errors.Is(err, errTooManyTokens) {
			t.rememberTooLong(key, time.Now().Add(cfg.Cooldown))
			return tokTooLong
		}
		if ctx.Err() != nil { // the client went away: the backend is not to blame
			return tokError
		}
		result = tokError
	}
	return result
}

func newTokenizeBody(req *router.Request) tokenizeBody {
	body := tokenizeBody{Model: req.Model}
	if len(req.Messages) == 0 {
		body.Prompt = &req.Prompt
		return body
	}
	yes := true
	body.Messages, body.AddGenerationPrompt = make([]wireMessage, len(req.Messages)), &yes
	for i, m := range req.Messages {
		body.Messages[i] = wireMessage{Role: m.Role, Content: m.Content}
	}
	return body
}

// readyBackends returns st's ready backends, starting at the next in rotation.
func (g *Gateway) readyBackends(st *state) []*backend {
	n := uint64(len(st.backends))
	start := g.tok.next.Add(1)
	out := make([]*backend, 0, n)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range n {
		if b := st.backends[(start+i)%n]; b.ready {
			out = append(out, b)
		}
	}
	return out
}

// claim reports whether b's tokenizer may be asked now: it never failed, or its cooldown has
// passed. A backend whose cooldown has passed is probed by this request alone: others skip
// it for probe, the call's longest.
func (t *tokenizer) claim(b *backend, now time.Time, probe time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.health[b.name]
	switch {
	case h == nil:
		t.health[b.name] = &tokenizerHealth{}
	case now.Before(h.skipUntil):
		return false
	case !h.skipUntil.IsZero():
		h.skipUntil = now.Add(probe)
	}
	return true
}

// succeeded records a good answer of b's tokenizer, with the max_model_len it gave (0: none).
func (t *tokenizer) succeeded(b *backend, maxModelLen int) {
	t.mu.Lock()
	if h := t.health[b.name]; h != nil {
		h.skipUntil = time.Time{}
		if maxModelLen > 0 {
			h.maxModelLen = maxModelLen
		}
	}
	t.mu.Unlock()
	t.metrics.tokenizerUp.WithLabelValues(b.name).Set(1)
}

// failed records a failure of b's tokenizer, for reason: it is not asked until until.
func (t *tokenizer) failed(b *backend, reason string, until time.Time) {
	t.mu.Lock()
	if h := t.health[b.name]; h != nil {
		h.skipUntil = until
	}
	t.mu.Unlock()
	t.metrics.tokenizerUp.WithLabelValues(b.name).Set(0)
	t.metrics.tokenizeFailures.WithLabelValues(b.name, reason).Inc()
}

// limit is the most token ids b's answer may hold: the cap, lowered by its max_model_len.
func (t *tokenizer) limit(b *backend, maxTokens int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h := t.health[b.name]; h != nil && h.maxModelLen > 0 {
		return min(maxTokens, h.maxModelLen)
	}
	return maxTokens
}

func (t *tokenizer) knownTooLong(key uint64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	until, ok := t.tooLong.Get(key)
	if ok && !now.Before(until) {
		t.tooLong.Remove(key)
		return false
	}
	return ok
}

func (t *tokenizer) rememberTooLong(key uint64, until time.Time) {
	t.mu.Lock()
	t.tooLong.Add(key, until)
	t.mu.Unlock()
}

// errTooManyTokens is the failure of an answer holding more ids than the cap allows.
var errTooManyTokens = errors.New("gateway: tokenize: more token ids than tokenize.max_tokens or the backend's max_model_len")

// Bytes of a /tokenize answer read per id the cap allows (an id of 10 digits, a comma and a
// space), and beyond them.
const (
	answerBytesPerID = 12
	answerSlack      = 64 << 10
)

// ask asks b's /tokenize for body's ids within cfg's cap and timeout, and records how b's
// tokenizer did: a failure starts its cooldown, unless the request's own context ended.
func (t *tokenizer) ask(ctx context.Context, b *backend, body []byte, cfg TokenizeConfig) ([]int32, error) {
	ids, maxModelLen, reason, err := t.call(ctx, b.url, body, t.limit(b, cfg.MaxTokens), cfg.Timeout)
	switch {
	case err == nil:
		t.succeeded(b, maxModelLen)
	case errors.Is(err, errTooManyTokens): // the tokenizer works; the prompt is too long
		t.succeeded(b, maxModelLen)
		t.metrics.tokenizeFailures.WithLabelValues(b.name, "too_long").Inc()
	case ctx.Err() == nil:
		t.failed(b, reason, time.Now().Add(cfg.Cooldown))
	}
	return ids, err
}

// call posts body to base's /tokenize and decodes vLLM's TokenizeResponse, reading at most
// what limit ids take. On failure it names the reason for the metrics: timeout, connect,
// transport, status, invalid.
func (t *tokenizer) call(ctx context.Context, base string, body []byte, limit int, timeout time.Duration) (ids []int32, maxModelLen int, reason string, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return nil, 0, "transport", err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(hr)
	if err != nil {
		return nil, 0, failReason(ctx, err, "transport"), fmt.Errorf("gateway: tokenize: %s", errnoText(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, 0, "status", fmt.Errorf("gateway: tokenize: status %d", resp.StatusCode)
	}
	out, err := decodeAnswer(resp, int64(answerSlack+answerBytesPerID*limit))
	switch {
	case errors.Is(err, errTooManyTokens):
		return nil, 0, "", err
	case err != nil:
		return nil, 0, failReason(ctx, err, "invalid"), err
	case len(out.Tokens) > limit || out.MaxModelLen > 0 && len(out.Tokens) > out.MaxModelLen:
		return nil, out.MaxModelLen, "", errTooManyTokens
	}
	ids = make([]int32, len(out.Tokens))
	for i, id := range out.Tokens {
		ids[i] = int32(id) // bit for bit, as KV events' ids are kept (internal/kvevents)
	}
	return ids, out.MaxModelLen, "", nil
}

// failReason is "timeout" when ctx's deadline passed, "connect" for a dial error, else def.
func failReason(ctx context.Context, err error, def string) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "timeout"
	case isDialError(err):
		return "connect"
	}
	return def
}

// tokenizeAnswer is vLLM's TokenizeResponse (vllm/entrypoints/openai/protocol.py).
type tokenizeAnswer struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"` // vLLM's ids fit int32; llm-d-inference-sim's use all 32 bits
}

// decodeAnswer decodes resp's body, failing with errTooManyTokens when it is longer than
// maxBytes, before reading more than that.
func decodeAnswer(resp *http.Response, maxBytes int64) (tokenizeAnswer, error) {
	var out tokenizeAnswer
	if resp.ContentLength > maxBytes {
		return out, errTooManyTokens
	}
	r := &cappedReader{r: resp.Body, left: maxBytes}
	if err := json.NewDecoder(r).Decode(&out); err != nil {
		if r.over {
			return out, errTooManyTokens
		}
		return out, fmt.Errorf("gateway: tokenize: %w", err)
	}
	if out.Count != len(out.Tokens) {
		return out, fmt.Errorf("gateway: tokenize: count %d for %d tokens", out.Count, len(out.Tokens))
	}
	return out, nil
}

// cappedReader reads at most left bytes of r, then fails with errTooManyTokens and sets over
// if r holds more.
type cappedReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		if n, err := io.ReadFull(c.r, one[:]); n == 0 {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		c.over = true
		return 0, errTooManyTokens
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
