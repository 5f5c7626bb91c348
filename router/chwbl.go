package router

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// CHWBLConfig configures consistent hashing with bounded loads, as Neutree documents it (seed
// 004) after KubeAI's PrefixHash (routers.md §7).
type CHWBLConfig struct {
	// VirtualNodes is the number of ring positions per endpoint, at MD5("<id>:<index>").
	VirtualNodes int `json:"virtual_nodes_per_replica"`
	// LoadFactor bounds an endpoint's load relative to the mean (1.25 = 25% above it).
	LoadFactor float64 `json:"load_factor"`
	// MaxUserMessages is how many leading user messages join the system prompt in the key.
	MaxUserMessages int `json:"max_user_messages_for_cache"`
	// PrefixCharLength, when > 0, switches to KubeAI's key (PrefixHash, whose CRD default is
	// 100): the first PrefixCharLength bytes of the first user message for chat, of the
	// prompt otherwise; the system prompt is ignored. 0 keeps Neutree's key.
	PrefixCharLength int `json:"prefix_char_length"`
}

// DefaultCHWBLConfig returns Neutree's defaults: 100 virtual nodes, load factor 1.25, 2 user
// messages.
func DefaultCHWBLConfig() CHWBLConfig {
	return CHWBLConfig{VirtualNodes: 100, LoadFactor: 1.25, MaxUserMessages: 2}
}

// Validate checks ranges.
func (c CHWBLConfig) Validate() error {
	var errs []error
	if c.VirtualNodes < 1 || c.VirtualNodes > 100000 {
		errs = append(errs, fmt.Errorf("virtual_nodes_per_replica %d: want 1..100000", c.VirtualNodes))
	}
	if !(c.LoadFactor >= 1) || math.IsInf(c.LoadFactor, 0) {
		errs = append(errs, fmt.Errorf("load_factor %v: want a finite value >= 1", c.LoadFactor))
	}
	if c.MaxUserMessages < 0 {
		errs = append(errs, fmt.Errorf("max_user_messages_for_cache %d: want >= 0", c.MaxUserMessages))
	}
	if c.PrefixCharLength < 0 {
		errs = append(errs, fmt.Errorf("prefix_char_length %d: want >= 0 (0: Neutree's key)", c.PrefixCharLength))
	}
	return errors.Join(errs...)
}

// CHWBL hashes a request's cache key onto a ring of endpoints and walks the ring from there
// until an endpoint's in-flight load passes the bound: with n eligible endpoints and total
// in-flight T, endpoint e is accepted when InFlight(e)+1 ≤ (T+1)/n × LoadFactor. If none is
// accepted, the first endpoint found is used. The key is the system prompt plus the first
// MaxUserMessages user messages for chat requests, the whole prompt otherwise; a LoRA adapter
// name is prefixed, as KubeAI does, so adapters spread independently.
type CHWBL struct {
	cfg  CHWBLConfig
	mu   sync.Mutex
	cand []int
	sig  uint64      // signature of the eligible ID list the ring was built for
	ring []ringPoint // sorted by hash
	key  strings.Builder
}

type ringPoint struct {
	hash uint64
	pos  int32 // position in the eligible list the ring was built for
}

var _ Policy = (*CHWBL)(nil)

// NewCHWBL returns a CHWBL policy; it uses no randomness.
func NewCHWBL(cfg CHWBLConfig, _ *rand.Rand) (*CHWBL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: chwbl: %w", err)
	}
	return &CHWBL{cfg: cfg}, nil
}

// Name returns "chwbl".
func (*CHWBL) Name() string { return "chwbl" }

// Pick walks the ring from the request key's position.
func (p *CHWBL) Pick(req *Request, s *Snapshot) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	if p.cand, err = Eligible(p.cand, req, s); err != nil {
		return Decision{}, err
	}
	p.ensureRing(s)
	h := hashKey(p.cacheKey(req))
	start, _ := slices.BinarySearchFunc(p.ring, h, func(pt ringPoint, h uint64) int {
		switch {
		case pt.hash < h:
			return -1
		case pt.hash > h:
			return 1
		}
		return 0
	})
	total, minLoad := 0, math.MaxInt
	for _, i := range p.cand {
		total += s.Endpoints[i].InFlight
		minLoad = min(minLoad, s.Endpoints[i].InFlight)
	}
	bound := float64(total+1) / float64(len(p.cand)) * p.cfg.LoadFactor
	if float64(minLoad+1) > bound {
		// No endpoint can pass: the walk would visit the whole ring and fall back to the first.
		return Decision{Index: p.cand[p.ring[start%len(p.ring)].pos], Reason: ReasonRingSaturated}, nil
	}
	first := -1
	for k := range len(p.ring) {
		i := p.cand[p.ring[(start+k)%len(p.ring)].pos]
		if first < 0 {
			first = i
		}
		if float64(s.Endpoints[i].InFlight+1) <= bound {
			reason := ReasonRingFirst
			if i != first {
				reason = ReasonRingOverflow
			}
			return Decision{Index: i, Reason: reason}, nil
		}
	}
	return Decision{Index: first, Reason: ReasonRingSaturated}, nil
}

// ensureRing rebuilds the ring when the eligible endpoint list changed.
func (p *CHWBL) ensureRing(s *Snapshot) {
	sig := uint64(fnvOffset)
	for _, i := range p.cand {
		sig = fnv64(sig, s.Endpoints[i].ID)
		sig = fnv64(sig, "\x00")
	}
	if sig == p.sig && p.ring != nil {
		return
	}
	p.sig = sig
	p.ring = p.ring[:0]
	for pos, i := range p.cand {
		id := s.Endpoints[i].ID
		for v := 0; v < p.cfg.VirtualNodes; v++ {
			sum := md5.Sum([]byte(id + ":" + strconv.Itoa(v)))
			p.ring = append(p.ring, ringPoint{hash: binary.BigEndian.Uint64(sum[:8]), pos: int32(pos)})
		}
	}
	slices.SortFunc(p.ring, func(a, b ringPoint) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return int(a.pos - b.pos)
	})
}

// cacheKey builds the ring key: adapter, system prompt and the first user messages for chat;
// adapter and the whole prompt otherwise; or KubeAI's prefix key (prefixKey).
func (p *CHWBL) cacheKey(req *Request) string {
	if n := p.cfg.PrefixCharLength; n > 0 {
		return p.prefixKey(req, n)
	}
	if len(req.Messages) == 0 {
		if req.Adapter == "" {
			return req.Prompt
		}
		return req.Adapter + "\x00" + req.Prompt
	}
	b := &p.key
	b.Reset()
	b.WriteString(req.Adapter)
	users := 0
	for _, m := range req.Messages {
		switch {
		case m.Role == "system":
		case m.Role == "user" && users < p.cfg.MaxUserMessages:
			users++
		default:
			continue
		}
		b.WriteByte(0)
		b.WriteString(m.Content)
	}
	return b.String()
}

// prefixKey builds KubeAI's key: adapter and the first n bytes of the first user message for
// chat, of the prompt otherwise (routers.md §7.1).
func (p *CHWBL) prefixKey(req *Request, n int) string {
	text := req.Prompt
	if len(req.Messages) > 0 {
		text = ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				text = m.Content
				break
			}
		}
	}
	text = text[:min(n, len(text))]
	if req.Adapter == "" {
		return text
	}
	return req.Adapter + "\x00" + text
}
