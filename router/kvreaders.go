package router

// KVEventReader is implemented by a policy that may or may not read KV events depending on
// its configuration (a Pipeline reads them only when one of its scorers does).
type KVEventReader interface {
	ReadsKVEvents() bool
}

// ReadsKVEvents reports whether p decides on the replicas' KV events: it observes them and,
// where that depends on its configuration, says it reads them. The proxy warns when such a
// policy runs without an event source.
func ReadsKVEvents(p any) bool {
	if _, ok := p.(KVEventObserver); !ok {
		return false
	}
	if r, ok := p.(KVEventReader); ok {
		return r.ReadsKVEvents()
	}
	return true
}

// ReadsKVEvents is true when one of the pipeline's scorers reads KV events.
func (p *Pipeline) ReadsKVEvents() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.scorers {
		if ReadsKVEvents(w.Scorer) {
			return true
		}
	}
	return false
}
