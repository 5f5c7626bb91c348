package sweep

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxShards bounds a shard's count: more shards than this is a typing mistake, not a fleet.
const MaxShards = 100000

// Shard is part Index of Count of an ordered list of work items (a sweep's plan, a search
// round's candidates): it holds the items whose position modulo Count is Index. Dealing the
// items round-robin keeps the shards within one item of each other in size and spreads the
// points of a sweep, whose cost grows along its axes, across all of them. The zero value
// is the whole list.
type Shard struct {
	Index int // 0 ≤ Index < Count
	Count int // the number of shards, at least 1 (0 is read as 1)
}

// ParseShard reads "i/n", as cmd/simulate's -shard takes it (a Kubernetes Indexed Job
// passes its completion index as i).
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("sweep: shard %q: want i/n, such as 0/4", s)
	}
	i, err := strconv.Atoi(is)
	if err != nil {
		return Shard{}, fmt.Errorf("sweep: shard %q: index: %w", s, err)
	}
	n, err := strconv.Atoi(ns)
	if err != nil {
		return Shard{}, fmt.Errorf("sweep: shard %q: count: %w", s, err)
	}
	sh := Shard{Index: i, Count: n}
	if err := sh.Validate(); err != nil {
		return Shard{}, fmt.Errorf("sweep: shard %q: %w", s, err)
	}
	return sh, nil
}

// Validate checks 0 ≤ Index < Count ≤ MaxShards.
func (s Shard) Validate() error {
	var errs []error
	if s.Count < 1 || s.Count > MaxShards {
		errs = append(errs, fmt.Errorf("count: want 1..%d, got %d", MaxShards, s.Count))
	}
	if s.Index < 0 || (s.Count >= 1 && s.Index >= s.Count) {
		errs = append(errs, fmt.Errorf("index: want 0..count-1, got %d", s.Index))
	}
	return errors.Join(errs...)
}

// String is the shard as ParseShard reads it.
func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.count()) }

// Whole reports whether the shard is the whole list (one shard).
func (s Shard) Whole() bool { return s.count() == 1 }

func (s Shard) count() int { return max(s.Count, 1) }

// Has reports whether the item at position pos belongs to the shard.
func (s Shard) Has(pos int) bool { return pos >= 0 && pos%s.count() == s.Index }

// Positions lists the positions, among total items, that belong to the shard, ascending.
func (s Shard) Positions(total int) []int {
	var out []int
	for p := s.Index; p < total; p += s.count() {
		out = append(out, p)
	}
	return out
}

// Select returns the shard's items, in their order: the items at Positions(len(items)).
func Select[T any](s Shard, items []T) []T {
	var out []T
	for _, p := range s.Positions(len(items)) {
		out = append(out, items[p])
	}
	return out
}

// Jobs returns the shard's jobs of a plan: those whose Index (their place in Plan's order,
// kept as it is) belongs to the shard.
func (s Shard) Jobs(plan []Job) []Job {
	var out []Job
	for _, j := range plan {
		if s.Has(j.Index) {
			out = append(out, j)
		}
	}
	return out
}
