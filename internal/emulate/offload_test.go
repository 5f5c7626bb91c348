package emulate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"kvroute/internal/kvevents"
	"kvroute/sim/engine"
)

// TestKVOutCPUEvents checks that the CPU tier's events go out as the offloading connector's
// take_events sends them: token-less BlockStored with no parent and the offloaded block size,
// and BlockRemoved, both with medium CPU, never merged into the GPU's.
func TestKVOutCPUEvents(t *testing.T) {
	o := &kvOut{enc: kvevents.Positional, blockSize: 16}
	for _, ev := range []engine.KVEvent{
		{Stored: true, Hash: 1, Tokens: make([]int32, 16)},
		{Stored: true, Hash: 2, Medium: engine.MediumCPU, BlockSize: 32},
		{Stored: true, Hash: 3, Medium: engine.MediumCPU, BlockSize: 32},
		{Hash: 4},
		{Hash: 5, Medium: engine.MediumCPU},
	} {
		o.add(ev)
	}
	got, err := kvevents.Decode(kvevents.Encode(kvevents.Batch{Events: o.events}, o.enc), kvevents.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Kind      kvevents.Kind
		Hashes    []uint64
		Medium    string
		BlockSize int
		Tokens    int
		HasParent bool
	}
	var rows []row
	for _, ev := range got.Events {
		rows = append(rows, row{ev.Kind, ev.Hashes, ev.Medium, ev.BlockSize, len(ev.Tokens), ev.HasParent})
	}
	want := []row{
		{kvevents.BlockStored, []uint64{1}, "GPU", 16, 16, false},
		{kvevents.BlockStored, []uint64{2, 3}, "CPU", 32, 0, false},
		{kvevents.BlockRemoved, []uint64{4}, "GPU", 0, 0, false},
		{kvevents.BlockRemoved, []uint64{5}, "CPU", 0, 0, false},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestMetricsOffloadGolden pins the page of a replica with a CPU tier: vLLM's offload
// metrics, parseable, and num_cpu_blocks.
func TestMetricsOffloadGolden(t *testing.T) {
	st := &offloadStats{cpuBlocks: 32768, store: newHistogram(offloadSizeBuckets), load: newHistogram(offloadSizeBuckets)}
	st.transfer(true, 2<<20, time.Millisecond)
	st.transfer(true, 64<<20, 2*time.Millisecond)
	st.transfer(false, 300<<20, 7*time.Millisecond)
	s := snapshot{
		Metrics: engine.Metrics{NumGPUBlocks: 1000, BlockSize: 16, ExternalQueries: 9000, ExternalHits: 4096,
			OffloadStores: 2, OffloadLoads: 1, OffloadStoreBytes: 66 << 20, OffloadLoadBytes: 300 << 20,
			OffloadStoreTime: 3 * time.Millisecond, OffloadLoadTime: 7 * time.Millisecond},
		TTFT: newHistogram(ttftBuckets), E2E: newHistogram(e2eBuckets), Phases: newPhaseHists(), Offload: st,
	}
	var b bytes.Buffer
	if err := writeMetrics(&b, "llama", s, 0.9, false); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the page does not parse: %v", err)
	}
	for _, name := range []string{"vllm:kv_offload_total_bytes_total", "vllm:kv_offload_size", "vllm:external_prefix_cache_hits_total"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("no %s", name)
		}
	}
	checkGolden(t, "metrics_offload.golden", b.Bytes())
}
