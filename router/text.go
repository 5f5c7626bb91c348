package router

import "strings"

// TextFree is implemented by policies (and pipeline plugins) that never read a request's
// Prompt or Messages: they route on the model, the session key, token counts, token ids or
// load alone. A simulation can then skip generating prompt text, which costs more than
// routing for such policies.
type TextFree interface {
	// TextFree reports whether the policy never reads Request.Prompt or Request.Messages.
	TextFree() bool
}

// ReadsText reports whether policy p may read Request.Prompt or Request.Messages: true unless
// p says otherwise through TextFree. A Pipeline reads text when any of its plugins may.
func ReadsText(p any) bool {
	t, ok := p.(TextFree)
	return !ok || !t.TextFree()
}

// TextFree is true for the baseline policies: they read nothing of the prompt.
func (*Random) TextFree() bool          { return true }
func (*RoundRobin) TextFree() bool      { return true }
func (*LeastRequest) TextFree() bool    { return true }
func (*PowerOfTwo) TextFree() bool      { return true }
func (*LeastKVCache) TextFree() bool    { return true }
func (*SessionAffinity) TextFree() bool { return true }

// TextFree is true for the load scorers, the max-score picker and the precise prefix scorer,
// which reads token ids. (VTC is not text-free: without token counts it estimates them from
// the prompt's characters, as AIBrix does.)
func (QueueScorer) TextFree() bool    { return true }
func (KVCacheScorer) TextFree() bool  { return true }
func (MaxScorePicker) TextFree() bool { return true }
func (*PreciseScorer) TextFree() bool { return true }

// TextFree reports whether every filter, scorer and the picker of the pipeline is text-free.
func (p *Pipeline) TextFree() bool {
	for _, f := range p.filters {
		if ReadsText(f) {
			return false
		}
	}
	for _, s := range p.scorers {
		if ReadsText(s.Scorer) {
			return false
		}
	}
	return !ReadsText(p.picker)
}

// TextFree is true for the prefix scorer's llm-d-router variant, which hashes token ids.
func (p *PrefixScorer) TextFree() bool { return p.cfg.Variant == PrefixScoreLLMD }

// textMemo keeps the text Ray matches for one decision (Snapshot.Seq): the prompt, or the chat
// messages' contents concatenated with no separator (Ray's _normalize_prompt_to_string), so the
// Pick and Routed of one decision build it once. With adapterKeys, a LoRA request's text is
// keyed under "\x00adapter\x00" as the newest Ray does (_prefix_tree_key_prefix), and prefix is
// that key prefix's length in bytes. Callers hold the policy's lock.
type textMemo struct {
	adapterKeys bool
	seq         uint64
	text        string
	prefix      int
	buf         strings.Builder
}

func (m *textMemo) get(req *Request, seq uint64) string {
	if seq != 0 && m.seq == seq {
		return m.text
	}
	m.seq, m.text, m.prefix = seq, req.Prompt, 0
	keyed := m.adapterKeys && req.Adapter != ""
	if req.Messages == nil && !keyed {
		return m.text
	}
	m.buf.Reset()
	if keyed {
		m.buf.WriteByte(0)
		m.buf.WriteString(req.Adapter)
		m.buf.WriteByte(0)
		m.prefix = m.buf.Len()
	}
	if req.Messages == nil {
		m.buf.WriteString(req.Prompt)
	}
	for _, msg := range req.Messages {
		m.buf.WriteString(msg.Content)
	}
	m.text = m.buf.String()
	return m.text
}
