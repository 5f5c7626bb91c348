package workloads

// spares keeps ended objects (sessions, conversations) for reuse, newest first, up to
// maxSpares of them, so that a run's memory stays bounded by what is in flight.
type spares[T any] struct{ items []*T }

// maxSpares bounds a spares list.
const maxSpares = 256

// take returns the newest kept object, or nil when none is kept.
func (p *spares[T]) take() *T {
	k := len(p.items) - 1
	if k < 0 {
		return nil
	}
	x := p.items[k]
	p.items[k], p.items = nil, p.items[:k]
	return x
}

// put keeps x, which nothing else refers to, unless the list is full.
func (p *spares[T]) put(x *T) {
	if len(p.items) < maxSpares {
		p.items = append(p.items, x)
	}
}
