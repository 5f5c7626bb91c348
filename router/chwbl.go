package router

import (
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"kvroute/router/prefix"
)

// Variants of chwbl: two projects ship consistent hashing with bounded loads for LLMs.
const (
	// CHWBLNeutree is Neutree v1.1.1 (neutree-ai/neutree 6cb41726,
	// cluster-image-builder/serve/_replica_scheduler/chwbl_scheduler.py), a Ray Serve router.
	CHWBLNeutree = "neutree-v1.1.1"
	// CHWBLKubeAI is KubeAI v0.21.0's PrefixHash (substratusai/kubeai 6babe2c,
	// internal/loadbalancer/balance_chwbl.go).
	CHWBLKubeAI = "kubeai-v0.21.0"
)

// CHWBLConfig configures chwbl. Zero values take the variant's defaults.
type CHWBLConfig struct {
	// Variant is "neutree-v1.1.1" or "kubeai-v0.21.0"; empty means KubeAI when
	// PrefixCharLength is set and Neutree otherwise.
	Variant string `json:"variant"`
	// VirtualNodes is the number of ring positions per endpoint (Neutree 100, KubeAI 256).
	VirtualNodes int `json:"virtual_nodes_per_replica"`
	// LoadFactor bounds an endpoint's load relative to the mean (1.25 = 25% above it).
	LoadFactor float64 `json:"load_factor"`
	// MaxUserMessages is how many leading user messages Neutree's key takes (2).
	MaxUserMessages int `json:"max_user_messages_for_cache"`
	// PrefixCharLength is how many characters (runes) of the first user message, or of the
	// prompt, KubeAI's key takes (the CRD default, 100).
	PrefixCharLength int `json:"prefix_char_length"`
}

// DefaultCHWBLConfig returns the defaults: Neutree's variant, load factor 1.25, 2 user
// messages; the virtual nodes and prefix length follow the variant.
func DefaultCHWBLConfig() CHWBLConfig {
	return CHWBLConfig{LoadFactor: 1.25, MaxUserMessages: 2}
}

// resolved fills the variant's defaults in.
func (c CHWBLConfig) resolved() CHWBLConfig {
	if c.Variant == "" {
		c.Variant = CHWBLNeutree
		if c.PrefixCharLength > 0 {
			c.Variant = CHWBLKubeAI
		}
	}
	if c.Variant == CHWBLKubeAI {
		if c.VirtualNodes == 0 {
			c.VirtualNodes = 256 // api/k8s/v1/model_types.go Replication default
		}
		if c.PrefixCharLength == 0 {
			c.PrefixCharLength = 100 // model_types.go PrefixCharLength default
		}
	}
	if c.VirtualNodes == 0 {
		c.VirtualNodes = 100 // chwbl_scheduler.py initialize_state
	}
	return c
}

// Validate checks ranges.
func (c CHWBLConfig) Validate() error {
	var errs []error
	if c.Variant != "" && c.Variant != CHWBLNeutree && c.Variant != CHWBLKubeAI {
		errs = append(errs, fmt.Errorf("variant %q: want %q or %q", c.Variant, CHWBLNeutree, CHWBLKubeAI))
	}
	if c.VirtualNodes < 0 || c.VirtualNodes > 100000 {
		errs = append(errs, fmt.Errorf("virtual_nodes_per_replica %d: want 1..100000 (0: the variant's)", c.VirtualNodes))
	}
	if !(c.LoadFactor >= 1) || math.IsInf(c.LoadFactor, 0) {
		errs = append(errs, fmt.Errorf("load_factor %v: want a finite value >= 1", c.LoadFactor))
	}
	if c.MaxUserMessages < 0 {
		errs = append(errs, fmt.Errorf("max_user_messages_for_cache %d: want >= 0", c.MaxUserMessages))
	}
	if c.PrefixCharLength < 0 {
		errs = append(errs, fmt.Errorf("prefix_char_length %d: want >= 0 (0: the variant's)", c.PrefixCharLength))
	}
	return errors.Join(errs...)
}

// CHWBL hashes a request's cache key onto a ring of endpoints and walks the ring from there
// to the first eligible endpoint whose load is within the bound; if none is, the first
// eligible endpoint met. Loads are the router's in-flight counts; T is their sum and n the
// number of ready endpoints serving the model (adapter or not).
//
// Neutree (chwbl_scheduler.py): ring positions MD5("<id>:<i>") (_add_replica_to_ring 190–198),
// key MD5 (_hash 178–181, first 8 bytes); accept when load+1 ≤ (T+1)/n × LoadFactor
// (_check_load_with_snapshot 149–176); key = "system:<last system message>" (when not empty)
// and "user_<k>:<content>" for the first MaxUserMessages user messages, joined by "|"
// (_extract_cache_key 290–318); with neither, str(payload) (neutreePayload).
//
// KubeAI (balance_chwbl.go): ring positions xxhash("<id><i>") (chwblAddEndpoint 86–96), key
// xxhash(adapter + prefix) (group.go 70), prefix = the first PrefixCharLength runes of the
// first user message, of the prompt otherwise (internal/apiutils/request.go firstNChars);
// accept any endpoint when T = 0, else when load ≤ (T+1)/n × LoadFactor (chwblLoadOK 152–162).
type CHWBL struct {
	cfg    CHWBLConfig
	kubeai bool
	mu     sync.Mutex
	cand   []int
	sig    uint64      // signature of the eligible ID list the ring was built for
	ring   []ringPoint // sorted by hash
	key    []byte      // the request's key, rebuilt per decision
	md5    hash.Hash
	sum    [md5.Size]byte
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
	cfg = cfg.resolved()
	return &CHWBL{cfg: cfg, kubeai: cfg.Variant == CHWBLKubeAI, md5: md5.New()}, nil
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
	h := p.keyHash(req)
	start, _ := slices.BinarySearchFunc(p.ring, h, func(pt ringPoint, h uint64) int {
		switch {
		case pt.hash < h:
			return -1
		case pt.hash > h:
			return 1
		}
		return 0
	})
	total, n := groupLoad(req, s)
	bound := float64(total+1) / float64(n) * p.cfg.LoadFactor
	accept := func(load int) bool {
		if p.kubeai {
			return total == 0 || float64(load) <= bound
		}
		return float64(load+1) <= bound
	}
	minLoad := math.MaxInt
	for _, i := range p.cand {
		minLoad = min(minLoad, s.Endpoints[i].InFlight)
	}
	if !accept(minLoad) {
		// No endpoint can pass: the walk would visit the whole ring and fall back to the first.
		return Decision{Index: p.cand[p.ring[start%len(p.ring)].pos], Reason: ReasonRingSaturated}, nil
	}
	first := -1
	for k := range len(p.ring) {
		i := p.cand[p.ring[(start+k)%len(p.ring)].pos]
		if first < 0 {
			first = i
		}
		if accept(s.Endpoints[i].InFlight) {
			reason := ReasonRingFirst
			if i != first {
				reason = ReasonRingOverflow
			}
			return Decision{Index: i, Reason: reason}, nil
		}
	}
	return Decision{Index: first, Reason: ReasonRingSaturated}, nil
}

// groupLoad returns the in-flight total and the number of the ready endpoints serving req's
// model, whatever its adapter: KubeAI's model group, Neutree's deployment replicas.
func groupLoad(req *Request, s *Snapshot) (total, n int) {
	model := Request{Model: req.Model}
	for i := range s.Endpoints {
		if e := &s.Endpoints[i]; Serves(e, &model) {
			total += e.InFlight
			n++
		}
	}
	return total, max(n, 1)
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
			var h uint64
			if p.kubeai {
				h = prefix.KeyHashString(id + strconv.Itoa(v))
			} else {
				h = p.md5Prefix([]byte(id + ":" + strconv.Itoa(v)))
			}
			p.ring = append(p.ring, ringPoint{hash: h, pos: int32(pos)})
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

// md5Prefix is Neutree's _hash: the first 16 hex digits of the MD5 digest, as an integer.
func (p *CHWBL) md5Prefix(b []byte) uint64 {
	p.md5.Reset()
	p.md5.Write(b)
	return binary.BigEndian.Uint64(p.md5.Sum(p.sum[:0])[:8])
}

// keyHash hashes the request's key as the variant does.
func (p *CHWBL) keyHash(req *Request) uint64 {
	if p.kubeai {
		p.key = p.kubeaiKey(p.key[:0], req)
		return prefix.KeyHash(p.key)
	}
	if p.key = p.neutreeKey(p.key[:0], req); len(p.key) > 0 {
		return p.md5Prefix(p.key)
	}
	p.key = p.neutreePayload(p.key[:0], req)
	return p.md5Prefix(p.key)
}

// neutreePayload appends Neutree's key for a request with no system or user message:
// str(payload), Python's rendering of the call's args, a one-tuple of the JSON body as a dict
// (appendPyPayload). Live, that is the body the client sent; in simulation, where a request has
// no body, the body of a client sending only model, prompt or messages, and max_tokens. A body
// that does not parse (the gateway rejects those first) falls back to the request id, as
// Neutree's except branch does.
func (p *CHWBL) neutreePayload(b []byte, req *Request) []byte {
	if req.Body != nil {
		out, err := appendPyPayload(b, req.Body)
		if err != nil {
			return append(b[:0], req.ID...)
		}
		return out
	}
	b = append(appendPyStr(append(b, "({'model': "...), req.Model), ", "...)
	if req.Messages != nil {
		b = append(b, "'messages': ["...)
		for i, m := range req.Messages {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(appendPyStr(append(b, "{'role': "...), m.Role), ", 'content': "...)
			b = append(appendPyStr(b, m.Content), '}')
		}
		b = append(b, ']')
	} else {
		b = appendPyStr(append(b, "'prompt': "...), req.Prompt)
	}
	if req.MaxOutputTokens > 0 {
		b = strconv.AppendInt(append(b, ", 'max_tokens': "...), int64(req.MaxOutputTokens), 10)
	}
	return append(b, "},)"...)
}

// neutreeKey appends Neutree's cache key (_extract_cache_key) to b.
func (p *CHWBL) neutreeKey(b []byte, req *Request) []byte {
	system, users := "", 0
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = m.Content
		} else if m.Role == "user" {
			users++
			if users >= p.cfg.MaxUserMessages {
				break
			}
		}
	}
	if system != "" {
		b = append(append(b, "system:"...), system...)
	}
	users = 0
	for _, m := range req.Messages {
		if m.Role != "user" {
			continue
		}
		if len(b) > 0 {
			b = append(b, '|')
		}
		b = append(strconv.AppendInt(append(b, "user_"...), int64(users), 10), ':')
		b = append(b, m.Content...)
		if users++; users >= p.cfg.MaxUserMessages {
			break
		}
	}
	return b // empty: no system or user message (keyHash hashes the whole request)
}

// kubeaiKey appends KubeAI's key to b: the adapter, then the first PrefixCharLength runes of
// the first user message for chat (none when there is no user message), of the prompt otherwise.
func (p *CHWBL) kubeaiKey(b []byte, req *Request) []byte {
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
	b = append(b, req.Adapter...)
	n := 0
	for k := range text {
		if n == p.cfg.PrefixCharLength {
			text = text[:k]
			break
		}
		n++
	}
	return append(b, text...)
}
