package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/sim/engine"
)

// kvLog records what a KV event observer hears.
type kvLog []string

func (l *kvLog) BlockStored(ep string, h uint64, medium string)  { *l = append(*l, "stored") }
func (l *kvLog) BlockRemoved(ep string, h uint64, medium string) { *l = append(*l, "removed") }
func (l *kvLog) AllBlocksCleared(ep string)                      { *l = append(*l, "cleared") }

// TestApplyKVKeepsCPUEventsFromGPUObservers checks that the CPU tier's events never reach a
// policy's index of the GPU caches as GPU stores or removals.
func TestApplyKVKeepsCPUEventsFromGPUObservers(t *testing.T) {
	events := []engine.KVEvent{
		{Stored: true, Hash: 1},
		{Stored: true, Hash: 1, Medium: engine.MediumCPU, BlockSize: 16},
		{Hash: 1, Medium: engine.MediumCPU},
		{Hash: 1},
		{Cleared: true},
	}
	var got kvLog
	for _, ev := range events {
		applyKV(&got, "replica-0", ev)
	}
	if diff := cmp.Diff(kvLog{"stored", "removed", "cleared"}, got); diff != "" {
		t.Errorf("observer heard (-want +got):\n%s", diff)
	}
}
