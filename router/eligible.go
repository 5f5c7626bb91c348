package router

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Serves reports whether e may serve req: it is ready, and it lists req's adapter (or, without
// an adapter, its model) among its models, or lists no models at all.
func Serves(e *EndpointState, req *Request) bool {
	if !e.Ready {
		return false
	}
	need := req.Model
	if req.Adapter != "" {
		need = req.Adapter
	}
	if need == "" || len(e.Models) == 0 {
		return true
	}
	for _, m := range e.Models {
		if m == need {
			return true
		}
	}
	return false
}

// Eligible appends to dst the indices of the endpoints of s that serve req, in snapshot order.
// It returns an error wrapping ErrNoEndpoint when there are none.
func Eligible(dst []int, req *Request, s *Snapshot) ([]int, error) {
	dst = dst[:0]
	for i := range s.Endpoints {
		if Serves(&s.Endpoints[i], req) {
			dst = append(dst, i)
		}
	}
	if len(dst) == 0 {
		return dst, fmt.Errorf("%w: model %q, %d endpoints", ErrNoEndpoint, req.Model, len(s.Endpoints))
	}
	return dst, nil
}

// RequestLoad is the load least-request compares: the router's own in-flight count plus the
// replica's running and waiting requests as last scraped. The in-flight part is exact and
// fresh; the scraped part sees traffic from other routers. Both count a request this router
// sent once it is scraped, which keeps the ranking while letting stale scrapes matter less.
func RequestLoad(e *EndpointState) int { return e.InFlight + e.Running + e.Waiting }

// pickMin returns the candidate with the smallest key, breaking ties uniformly at random
// (reservoir sampling, one rng draw per tie), or -1 for no candidates.
func pickMin(rng *rand.Rand, cand []int, key func(i int) float64) int {
	best, bestKey, ties := -1, math.Inf(1), 0
	for _, i := range cand {
		k := key(i)
		switch {
		case k < bestKey:
			best, bestKey, ties = i, k, 1
		case k == bestKey:
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// interner maps endpoint IDs to dense int32 ids for the prefix structures. Ids are never
// reused, so a removed endpoint that comes back starts with a clean slate only if its state
// was dropped on removal.
type interner struct {
	ids   map[string]int32
	names []string
}

func newInterner() interner { return interner{ids: make(map[string]int32)} }

// id returns name's id, assigning the next one if name is new.
func (n *interner) id(name string) int32 {
	if id, ok := n.ids[name]; ok {
		return id
	}
	id := int32(len(n.names))
	n.ids[name] = id
	n.names = append(n.names, name)
	return id
}

// lookup returns name's id if it has one.
func (n *interner) lookup(name string) (int32, bool) {
	id, ok := n.ids[name]
	return id, ok
}

// size returns the number of ids assigned.
func (n *interner) size() int { return len(n.names) }
