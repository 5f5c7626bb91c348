// Package spares keeps ended objects for reuse: a bounded free list, so that a simulation's
// memory stays bounded by what is in flight while it reuses the state of what has ended.
package spares

// Max bounds a List.
const Max = 256

// List keeps up to Max ended objects, newest first. The zero value is empty and ready.
type List[T any] struct{ items []*T }

// Take returns the newest kept object, or nil when none is kept.
func (p *List[T]) Take() *T {
	k := len(p.items) - 1
	if k < 0 {
		return nil
	}
	x := p.items[k]
	p.items[k], p.items = nil, p.items[:k]
	return x
}

// Put keeps x, which nothing else refers to, unless the list is full.
func (p *List[T]) Put(x *T) {
	if len(p.items) < Max {
		p.items = append(p.items, x)
	}
}
