package emulate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"kvroute/gpumodel"

	"kvroute/internal/openai"
	"kvroute/internal/vllm"
	"kvroute/sim"
	"kvroute/sim/engine"
)

// Roles a replica may serve in a disaggregated fleet.
const (
	// RolePrefill serves prefill legs only: requests with kv_transfer_params.do_remote_decode,
	// not streamed.
	RolePrefill = "prefill"
	// RoleDecode serves decode legs (kv_transfer_params.do_remote_prefill) and whole requests.
	RoleDecode = "decode"
)

// PDConfig is a replica's part in a disaggregated fleet and its side of the NIXL link. The
// zero value is an aggregated replica, which ignores kv_transfer_params as vLLM without a KV
// connector does.
type PDConfig struct {
	// Role is "" (aggregated), prefill or decode.
	Role string `json:"role" yaml:"role"`
	// BandwidthGbps is the KV transfer link per GPU, in Gbit/s; a replica of TP GPUs reads
	// over TP of them, as fleet.kv_transfer.bandwidth_gbps (0: the GPU's NIC in the catalog).
	BandwidthGbps float64 `json:"bandwidth_gbps" yaml:"bandwidth_gbps"`
	// BaseLatency is added to every transfer (0: none).
	BaseLatency time.Duration `json:"base_latency" yaml:"base_latency"`
	// AbortTimeout is how long a prefill leg's blocks stay held when no decoder reads them
	// (VLLM_NIXL_ABORT_REQUEST_TIMEOUT; 0: 480s).
	AbortTimeout time.Duration `json:"abort_timeout" yaml:"abort_timeout"`
	// FailurePolicy is vLLM's kv_load_failure_policy, fail (default) or recompute.
	FailurePolicy string `json:"failure_policy" yaml:"failure_policy"`
}

func (p PDConfig) validate() error {
	var errs []error
	if p.Role != "" && p.Role != RolePrefill && p.Role != RoleDecode {
		errs = append(errs, fmt.Errorf("emulate: pd.role %q: want %s or %s", p.Role, RolePrefill, RoleDecode))
	}
	if p.BandwidthGbps < 0 || math.IsNaN(p.BandwidthGbps) || math.IsInf(p.BandwidthGbps, 0) {
		errs = append(errs, fmt.Errorf("emulate: pd.bandwidth_gbps %v: want > 0, or 0 for the GPU's", p.BandwidthGbps))
	}
	if p.BaseLatency < 0 || p.AbortTimeout < 0 {
		errs = append(errs, fmt.Errorf("emulate: pd.base_latency %v, pd.abort_timeout %v: want >= 0", p.BaseLatency, p.AbortTimeout))
	}
	if p.FailurePolicy != "" && p.FailurePolicy != "fail" && p.FailurePolicy != "recompute" {
		errs = append(errs, fmt.Errorf("emulate: pd.failure_policy %q: want fail or recompute", p.FailurePolicy))
	}
	return errors.Join(errs...)
}

// engineConfig is the engine's side of p.
func (p PDConfig) engineConfig() engine.KVTransferConfig {
	return engine.KVTransferConfig{AbortTimeout: p.AbortTimeout, Recompute: p.FailurePolicy == "recompute"}
}

// transferTime is how long reading tokens of prompt KV into a replica of deployment d takes
// over its TP GPUs' links: the base latency, then the bytes vLLM's NIXL connector moves
// (gpumodel.Deployment.KVTransferBytes) at the link's bandwidth.
func (p PDConfig) transferTime(tokens int, d gpumodel.Deployment) time.Duration {
	secs := float64(d.KVTransferBytes(tokens)) / d.TransferBandwidth(p.BandwidthGbps)
	return p.BaseLatency + time.Duration(secs*float64(time.Second))
}

// pdLeg is what a request's kv_transfer_params make of it here.
type pdLeg struct {
	role   engine.PDRole
	params vllm.KVTransferParams // a decode leg's: where its KV waits
	id     string                // the request id both legs share (X-Request-Id)
	host   string                // a prefill leg's: the host:port the client reached it at
}

// pdCheck reads a request's kv_transfer_params against the replica's role: a prefill
// replica takes prefill legs only, never streamed (llm-d/llm-d-inference-sim@eec055a
// pkg/llm-d-inference-sim/helpers.go:76-78 answers a streamed one 400 too); a prefill leg
// runs one token; a decode leg (do_remote_prefill) reads its prompt's KV first. params is
// the value the body's parse read (openai.Request's KVTransferParams): the body is parsed
// once, with the same rules for every role.
func (r *Replica) pdCheck(p *pending, req *http.Request, params []byte) *openai.Error {
	if r.cfg.PD.Role == "" {
		return nil
	}
	kv, ok, err := vllm.ParseKVTransferParams(params)
	bad := func(msg string) *openai.Error {
		return &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "kv_transfer_params", Message: msg}
	}
	switch {
	case err != nil:
		return bad("emulate: " + err.Error())
	case r.cfg.PD.Role == RolePrefill && (!ok || !kv.DoRemoteDecode):
		return bad("emulate: a prefill replica serves prefill legs only: kv_transfer_params.do_remote_decode must be true")
	case ok && kv.DoRemoteDecode && p.stream:
		return bad("Prefill does not support streaming")
	case ok && kv.DoRemoteDecode:
		p.pd = pdLeg{role: engine.PDPrefill, id: req.Header.Get("X-Request-Id"), host: req.Host}
		p.st.req.OutputTokens = 1
		p.st.req.Answer = p.st.req.Answer[:min(len(p.st.req.Answer), 1)]
	case ok && kv.DoRemotePrefill:
		p.pd = pdLeg{role: engine.PDDecode, params: kv}
	}
	p.st.req.PD = p.pd.role
	if p.pd.id == "" {
		p.pd.id = p.st.req.ID
	}
	return nil
}

// heldLegs are a prefill replica's finished prefill legs whose blocks wait for a decoder,
// by the request id they answered with. The engine frees a leg's blocks on its own at the
// abort timeout or when the replica fails, so entries are pruned against it whenever the
// map has doubled since the last pruning: it stays within twice the legs the engine holds,
// which its KV capacity bounds.
type heldLegs struct {
	mu    sync.Mutex
	legs  map[string]*engine.Request
	limit int // the size at which put prunes
}

// minHeldPrune is the least size at which heldLegs prunes.
const minHeldPrune = 64

// put registers leg req under id; holds reports whether the engine still holds a leg (it is
// called without h.mu held).
func (h *heldLegs) put(id string, req *engine.Request, holds func([]*engine.Request) []bool) {
	h.mu.Lock()
	if h.legs == nil {
		h.legs, h.limit = map[string]*engine.Request{}, minHeldPrune
	}
	h.legs[id] = req
	if len(h.legs) < h.limit {
		h.mu.Unlock()
		return
	}
	ids, legs := make([]string, 0, len(h.legs)), make([]*engine.Request, 0, len(h.legs))
	for id, leg := range h.legs {
		ids, legs = append(ids, id), append(legs, leg)
	}
	h.limit = 1 << 62 // no second pruning while this one runs
	h.mu.Unlock()
	held := holds(legs)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, id := range ids {
		if !held[i] && h.legs[id] == legs[i] {
			delete(h.legs, id)
		}
	}
	h.limit = max(minHeldPrune, 2*len(h.legs))
}

func (h *heldLegs) take(id string) *engine.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	req := h.legs[id]
	delete(h.legs, id)
	return req
}

// prefillParams are the kv_transfer_params a finished prefill leg answers with, as vLLM's
// NixlConnector returns them (request_finished): where its blocks wait and under which id.
// It registers the leg so that a decoder's read-done notice frees its blocks.
func (r *Replica) prefillParams(p pending, blocks []int32) *vllm.KVTransferParams {
	host, port := "", 0
	if h, ps, err := net.SplitHostPort(p.pd.host); err == nil {
		host, port = h, atoiOr(ps, 0)
	}
	ids := make([]int, len(blocks))
	for i, b := range blocks {
		ids[i] = int(b)
	}
	r.held.put(p.pd.id, &p.st.req, func(legs []*engine.Request) []bool {
		held := make([]bool, len(legs))
		r.do(func(c *core) {
			for i, leg := range legs {
				held[i] = c.eng.Holds(leg)
			}
		})
		return held
	})
	return &vllm.KVTransferParams{DoRemotePrefill: true, RemoteEngineID: r.idPrefix, RemoteBlockIDs: ids,
		RemoteRequestID: p.pd.id, RemoteHost: host, RemotePort: port, TPSize: r.dep.TP}
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}

// readDone serves POST /nixl/read-done?request_id=ID: a decoder finished reading the blocks
// of the prefill leg ID (vLLM's decoder tells the prefill engine through NIXL notifications),
// which are freed. An unknown id, or one whose blocks are gone (freed already, timed out,
// the replica failed), is answered 404.
func (r *Replica) readDone(w http.ResponseWriter, req *http.Request) {
	leg, held := r.held.take(req.URL.Query().Get("request_id")), false
	if leg != nil {
		r.do(func(c *core) { held = c.eng.ReleaseHeld(leg) })
	}
	if !held {
		http.NotFound(w, req)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// remoteRead runs a decode leg's read of tokens prompt tokens: it ends after the link's
// transfer time, in virtual time, and the prefill replica is told so it frees its blocks.
func (c *core) remoteRead(req *engine.Request, tokens int) {
	st := req.Tag.(*stream)
	end := c.k.Now() + sim.Time(c.pd.transferTime(tokens, c.dep))
	c.k.Schedule(end, 0, func(sim.Time) {
		c.eng.RemoteKVDone(req, true)
		go notifyReadDone(st.pdParams)
	})
}

// notifyReadDone tells the prefill replica of params that its blocks were read, as a NIXL
// notification would. It gives up quietly: the blocks are freed at the abort timeout.
func notifyReadDone(p vllm.KVTransferParams) {
	if p.RemoteHost == "" || p.RemotePort == 0 || p.RemoteRequestID == "" {
		return
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(p.RemoteHost, strconv.Itoa(p.RemotePort)), Path: "/nixl/read-done",
		RawQuery: url.Values{"request_id": {p.RemoteRequestID}}.Encode()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_ = resp.Body.Close()
	}
}
