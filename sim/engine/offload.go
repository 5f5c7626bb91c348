package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"kvroute/gpumodel"
	"kvroute/sim"
)

// OffloadConfig gives a replica a CPU KV tier, as vLLM's OffloadingConnector with its native
// CPU backend does (--kv-offloading-backend native --kv-offloading-size GiB, vLLM ≥ 0.11;
// docs/simulator.md, "CPU KV tier", lists the rules and the vLLM code behind each). The zero
// value is no tier.
type OffloadConfig struct {
	// Bytes is the tier's size in bytes for the whole replica (vLLM's cpu_bytes_to_use,
	// kv_offloading_size × 2^30); 0: no tier.
	Bytes int64
	// BlockSize is the offloaded block size in tokens (the connector's block_size), a
	// multiple of the GPU block size; 0: the GPU block size.
	BlockSize int
	// Decode offloads the blocks a request fills while decoding too (vLLM's
	// offload_prompt_only false); by default only prompt blocks are offloaded.
	Decode bool
	// Bandwidth is the one-way GPU↔host copy bandwidth per GPU in bytes/s; 0: the GPU's
	// catalog figure (gpumodel.GPU.HostBandwidth). Each GPU of a TP replica copies its own
	// shard, so a replica moves TP times as much.
	Bandwidth float64
	// Latency is the fixed cost of one transfer (one request's load or one step's store for
	// a request), before its bytes move.
	Latency time.Duration
	// LoadTimeout is how long a load may take before it is abandoned and the request
	// recomputes what it would have loaded (vLLM's load_timeout_seconds); 0: 30 s.
	LoadTimeout time.Duration
	// Eviction is the tier's eviction policy, lru (the default, also for "") or arc (vLLM's
	// eviction_policy).
	Eviction string
	// IgnoreGPUHits admits every request as if the GPU's prefix cache held nothing, so that
	// prefixes come from the CPU tier or are computed: vLLM with prefix caching disabled
	// and a connector, as the offloading blog measures loads (calibration).
	IgnoreGPUHits bool
}

// DefaultLoadTimeout is vLLM's default load_timeout_seconds.
const DefaultLoadTimeout = 30 * time.Second

// Enabled reports whether c gives a replica a CPU tier.
func (c OffloadConfig) Enabled() bool { return c.Bytes > 0 }

// Validate reports every problem with c for a replica of deployment d, joined.
func (c OffloadConfig) Validate(d gpumodel.Deployment) error {
	if !c.Enabled() {
		if c.Bytes < 0 {
			return fmt.Errorf("engine: kv_offloading_size %d bytes: want >= 0", c.Bytes)
		}
		return nil
	}
	var errs []error
	if bs := c.BlockSize; bs < 0 || bs > 0 && (d.BlockSize <= 0 || bs%d.BlockSize != 0) {
		errs = append(errs, fmt.Errorf("engine: kv_offloading_block_size %d: want a multiple of the GPU block size %d", bs, d.BlockSize))
	}
	if bw := c.Bandwidth; !(bw >= 0) || math.IsInf(bw, 1) {
		errs = append(errs, fmt.Errorf("engine: offload bandwidth %v: want a finite value >= 0", bw))
	} else if bw == 0 && d.GPU.HostBandwidth <= 0 {
		errs = append(errs, fmt.Errorf("engine: gpu %s has no host bandwidth in the catalog: set the offload bandwidth", d.GPU.Name))
	}
	if c.Latency < 0 || c.LoadTimeout < 0 {
		errs = append(errs, errors.New("engine: offload latency and load timeout must not be negative"))
	}
	if err := CheckEviction(c.Eviction); err != nil {
		errs = append(errs, fmt.Errorf("engine: %w", err))
	}
	if len(errs) == 0 && c.capacity(d) < 1 {
		errs = append(errs, fmt.Errorf("engine: kv_offloading_size %d bytes holds no offloaded block", c.Bytes))
	}
	return errors.Join(errs...)
}

// blockSize returns the offloaded block size in tokens.
func (c OffloadConfig) blockSize(d gpumodel.Deployment) int {
	if c.BlockSize > 0 {
		return c.BlockSize
	}
	return d.BlockSize
}

// capacity returns how many offloaded blocks the tier holds: its bytes over the KV bytes of
// one offloaded block on all the replica's GPUs.
func (c OffloadConfig) capacity(d gpumodel.Deployment) int64 {
	per := d.KVBytesPerTokenPerGPU() * int64(max(d.TP, 1)) * int64(c.blockSize(d))
	if per <= 0 {
		return 0
	}
	return c.Bytes / per
}

// Medium is where a KV block is held, as vLLM's KV events name it.
type Medium uint8

// The media a replica's blocks are held in.
const (
	// MediumGPU is the GPU's prefix cache (the zero value).
	MediumGPU Medium = iota
	// MediumCPU is the CPU tier (OffloadConfig).
	MediumCPU
)

// String returns the medium's name in vLLM's KV events: "GPU" or "CPU".
func (m Medium) String() string {
	if m == MediumCPU {
		return "CPU"
	}
	return "GPU"
}

// The states of a request's load from the CPU tier (seq.load).
const (
	loadNone     uint8 = iota
	loadInFlight       // WAITING_FOR_REMOTE_KVS: its GPU blocks are allocated, the copy runs
	loadDone           // loaded (or abandoned): back to waiting, holding its blocks
)

// offloader is a replica's CPU tier: the tier's contents (cpuTier), the link its copies
// share, and the loads and stores in flight.
type offloader struct {
	bs, factor int      // offloaded block size in tokens, and in GPU blocks
	tokenBytes int64    // KV bytes of one token on one GPU
	gpus       int64    // the replica's GPUs (TP)
	bw         float64  // bytes/s per GPU, one way
	latency    sim.Time // per transfer
	timeout    sim.Time
	decode     bool
	tier       cpuTier
	linkFree   sim.Time // when the link ends the transfers queued on it
	epoch      uint64   // bumped when the replica fails: transfers of an older one are void
	loads      int      // loads in flight
	jobs       map[*seq]*loadJob
	pending    []storeReq // stores noted this step, issued when it ends
	noGPUHits  bool       // OffloadConfig.IgnoreGPUHits

	buf, buf2, toStore, evicted, stored []uint64
}

// storeReq is a request's offloaded blocks from..to-1, complete once the step ends.
type storeReq struct {
	s        *seq
	from, to int
}

// loadJob is a load in flight: the offloaded blocks it reads (pinned in the tier), and the
// request's GPU hit and the tokens it loads.
type loadJob struct {
	s              *seq
	hashes         []uint64
	gpuHit, tokens int
	epoch          uint64
	cancelled      bool
}

// storeJob is a store in flight: the offloaded blocks it writes and the GPU blocks it reads,
// which it holds until it ends.
type storeJob struct {
	hashes []uint64
	blocks []int32
	bytes  int64
	dur    time.Duration
	epoch  uint64
}

func newOffloader(c OffloadConfig, d gpumodel.Deployment) (*offloader, error) {
	if err := c.Validate(d); err != nil {
		return nil, err
	}
	o := &offloader{bs: c.blockSize(d), tokenBytes: d.KVBytesPerTokenPerGPU(), gpus: int64(max(d.TP, 1)),
		bw: c.Bandwidth, latency: sim.Time(c.Latency), timeout: sim.Time(c.LoadTimeout), decode: c.Decode,
		jobs: make(map[*seq]*loadJob), noGPUHits: c.IgnoreGPUHits}
	var err error
	if o.tier, err = newCPUTier(c.Eviction, int(min(c.capacity(d), math.MaxInt32))); err != nil {
		return nil, err
	}
	o.factor = o.bs / d.BlockSize
	if o.bw == 0 {
		o.bw = d.GPU.HostBandwidth
	}
	if o.timeout == 0 {
		o.timeout = sim.Time(DefaultLoadTimeout)
	}
	return o, nil
}

// transfer queues a copy of bytes (on each GPU) on the link at now and returns how long it
// takes and when it ends. Loads and stores share one link per GPU, first come first served,
// each at the full bandwidth: a copy starts when the ones before it have ended.
func (o *offloader) transfer(now sim.Time, bytes int64) (time.Duration, sim.Time) {
	d := time.Duration(o.latency) + time.Duration(math.Ceil(float64(bytes)/o.bw*1e9))
	start := max(now, o.linkFree)
	o.linkFree = start + sim.Time(d)
	return d, o.linkFree
}

// cpuHashes appends to dst the hashes of s's offloaded blocks from..to-1: each is the hash of
// the last GPU block it holds (OffloadingConnectorScheduler._get_block_hashes).
func (o *offloader) cpuHashes(s *seq, from, to int, dst []uint64) []uint64 {
	for j := from; j < to; j++ {
		dst = append(dst, s.hashes[(j+1)*o.factor-1])
	}
	return dst
}

// reset forgets the tier and every transfer (the replica failed at now).
func (o *offloader) reset(now sim.Time) {
	o.epoch++
	o.tier.clear()
	clear(o.jobs)
	o.loads, o.pending, o.linkFree = 0, o.pending[:0], now
}
