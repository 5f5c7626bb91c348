package cluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/sim/engine"
)

// kvLog records what a KV event observer hears.
type kvLog []string

func (l *kvLog) BlockStored(ep string, h uint64, medium string) {
	*l = append(*l, "stored "+medium)
}
func (l *kvLog) BlockRemoved(ep string, h uint64, medium string) {
	*l = append(*l, "removed "+medium)
}
func (l *kvLog) AllBlocksCleared(ep string) { *l = append(*l, "cleared") }

// TestApplyKVForwardsTiers checks that each event reaches the policies in its own tier: the
// CPU tier's stores and removals as CPU, never as GPU ones.
func TestApplyKVForwardsTiers(t *testing.T) {
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
	if diff := cmp.Diff(kvLog{"stored GPU", "stored CPU", "removed CPU", "removed GPU", "cleared"}, got); diff != "" {
		t.Errorf("observer heard (-want +got):\n%s", diff)
	}
}
