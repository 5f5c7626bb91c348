package workloads

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Limits on config values, so that a typo cannot ask for terabytes of prompts.
const (
	maxSegmentTokens = 1 << 20 // one prompt part or answer, tokens
	maxPrompts       = 10_000_000
	maxTurnsLimit    = 10_000
	maxRate          = 1e6 // sessions per second
	maxThinkTime     = 24 * time.Hour
	maxTenants       = 1000
	maxStages        = 10_000
	maxStageDuration = 24 * time.Hour
	maxConcurrency   = 1_000_000 // closed-loop clients
)

// problems collects config errors with the path of the offending field.
type problems struct{ errs []error }

func (p *problems) add(path, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("workloads: %s: %s", path, fmt.Sprintf(format, args...)))
}

func (p *problems) intRange(path string, v, lo, hi int) {
	if v < lo || v > hi {
		p.add(path, "must be in %d..%d, got %d", lo, hi, v)
	}
}

func (p *problems) floatRange(path string, v, lo, hi float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		p.add(path, "must be in %g..%g, got %g", lo, hi, v)
	}
}

func (p *problems) oneOf(path, v string, allowed ...string) {
	if !slices.Contains(allowed, v) {
		p.add(path, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}

// Validate checks c after Resolve: kinds and processes exist, every number is in range (no
// zero, negative, NaN or infinite values where they make no sense), fields suit the kind,
// and cross-field rules hold. It returns all problems joined with errors.Join.
func (c Config) Validate() error {
	r := c.Resolve()
	var p problems
	p.workload("workload", c.Workload, r.Workload)
	p.arrival("arrival", r.Arrival, r.Workload)
	p.intRange("requests", c.Requests, 0, math.MaxInt32)
	if c.Duration < 0 {
		p.add("duration", "must not be negative, got %v", c.Duration)
	}
	if r.Arrival.Normalize && c.Requests == 0 {
		p.add("arrival.normalize", "needs requests > 0 (the number of arrivals to rescale)")
	}
	p.closedLoop(c, r)
	if c.Requests == 0 && c.Duration == 0 && len(r.Arrival.Stages) > 0 {
		for i, t := range r.Workload.Tenants {
			if t.Arrival != nil && t.Arrival.Process != ProcessTrace {
				p.add(fmt.Sprintf("workload.tenants[%d].arrival", i),
					"a tenant with its own arrival never ends: set requests or duration (top-level stages do not end it)")
			}
		}
	}
	return errors.Join(p.errs...)
}

// closedLoop checks the rules of closed-loop shared-prefix clients, c as written and r
// resolved: clients start on a plain arrival process, and clients drawing prompts forever
// need a cap to end.
func (p *problems) closedLoop(c, r Config) {
	w := r.Workload
	if w.Kind != KindSharedPrefix || w.Concurrency == 0 {
		return
	}
	if len(r.Arrival.Stages) > 0 {
		p.add("arrival.stages", "not used with workload.concurrency (closed-loop clients hold their concurrency)")
	}
	if w.Repeat != nil && *w.Repeat && c.Requests == 0 && c.Duration == 0 {
		p.add("workload.concurrency", "with repeat the clients never stop: set requests or duration")
	}
}

// workload checks one workload: raw as written, r resolved.
func (p *problems) workload(path string, raw, r WorkloadConfig) {
	kinds := []string{string(KindSharedPrefix), string(KindSyntheticChat), string(KindShareGPT),
		string(KindMooncake), string(KindAzure), string(KindMix), string(KindChatPrefixes)}
	if !slices.Contains(kinds, string(r.Kind)) {
		p.oneOf(path+".kind", string(r.Kind), kinds...)
		return
	}
	p.applicable(path, raw, r)
	switch r.Kind {
	case KindSharedPrefix:
		p.sharedPrefix(path, r)
	case KindSyntheticChat:
		p.syntheticChat(path, r)
	case KindShareGPT:
		p.shareGPT(path, r)
	case KindMooncake:
		p.intRange(path+".block_tokens", r.BlockTokens, 1, 1<<16)
		p.path(path, r)
	case KindAzure:
		p.path(path, r)
	case KindMix:
		p.mix(path, raw, r)
	case KindChatPrefixes:
		p.chatPrefixes(path, r)
	}
}

func (p *problems) path(path string, r WorkloadConfig) {
	if r.Path == "" {
		p.add(path+".path", "is required for kind %s", r.Kind)
	}
}

// applicable reports fields set in raw that kind r.Kind does not use.
func (p *problems) applicable(path string, raw, r WorkloadConfig) {
	allowed := fieldsFor(r)
	v := reflect.ValueOf(raw)
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "kind" || v.Field(i).IsZero() || slices.Contains(allowed, name) {
			continue
		}
		p.add(path+"."+name, "not used by kind %s%s", r.Kind, modeNote(r))
	}
}

func modeNote(r WorkloadConfig) string {
	switch {
	case r.Kind == KindShareGPT:
		return " in mode " + r.Mode
	case r.Kind == KindSharedPrefix && r.Turns <= 1:
		return " with turns 1"
	case r.Kind == KindSyntheticChat && r.SystemPrompts == 0:
		return " without system_prompts"
	}
	return ""
}

// fieldsFor lists the YAML fields that a resolved workload's kind (and mode) uses.
func fieldsFor(r WorkloadConfig) []string {
	think := []string{"think_time", "think_dist"}
	switch r.Kind {
	case KindSharedPrefix:
		f := []string{"preset", "groups", "prompts_per_group", "system_prompt_tokens",
			"question_tokens", "repeat", "cycle", "turns", "output_tokens"}
		if r.Turns > 1 {
			f = append(f, think...)
		} else {
			f = append(f, "concurrency")
		}
		return f
	case KindSyntheticChat:
		f := append([]string{"mean_turns", "max_turns", "prompt_tokens", "length_dist",
			"max_message_tokens", "system_prompts", "output_tokens"}, think...)
		if r.LengthDist == DistLogNormal {
			f = append(f, "prompt_sigma", "output_sigma")
		}
		if r.SystemPrompts > 0 {
			f = append(f, "system_prompt_tokens")
		}
		return f
	case KindShareGPT:
		f := []string{"path", "mode", "shuffle", "min_tokens", "max_prompt_tokens", "max_total_tokens"}
		if r.Mode == ModeMultiTurn {
			return append(f, append(think, "max_turns")...)
		}
		return append(f, "output_tokens")
	case KindMooncake:
		return []string{"path", "block_tokens"}
	case KindAzure:
		return []string{"path"}
	case KindMix:
		return []string{"tenants"}
	case KindChatPrefixes:
		return chatPrefixesFields(r)
	}
	return nil
}

func (p *problems) sharedPrefix(path string, r WorkloadConfig) {
	p.oneOf(path+".preset", r.Preset, PresetSGLang, PresetInferencePerf)
	p.intRange(path+".groups", r.Groups, 1, maxPrompts)
	p.intRange(path+".prompts_per_group", r.PromptsPerGroup, 1, maxPrompts)
	if r.Groups > 0 && r.PromptsPerGroup > 0 && r.Groups > maxPrompts/r.PromptsPerGroup {
		p.add(path+".groups", "groups × prompts_per_group must be at most %d", maxPrompts)
	}
	p.intRange(path+".system_prompt_tokens", r.SystemPromptTokens, 1, maxSegmentTokens)
	p.intRange(path+".question_tokens", r.QuestionTokens, 1, maxSegmentTokens)
	p.intRange(path+".output_tokens", r.OutputTokens, 1, maxSegmentTokens)
	p.intRange(path+".turns", r.Turns, 1, maxTurnsLimit)
	p.intRange(path+".concurrency", r.Concurrency, 0, maxConcurrency)
	if r.Cycle && !*r.Repeat {
		p.add(path+".cycle", "needs repeat: true (without repeat every prompt is sent once)")
	}
	p.think(path, r)
}

func (p *problems) syntheticChat(path string, r WorkloadConfig) {
	p.intRange(path+".max_turns", r.MaxTurns, 1, maxTurnsLimit)
	p.floatRange(path+".mean_turns", r.MeanTurns, 1, float64(max(r.MaxTurns, 1)))
	p.intRange(path+".max_message_tokens", r.MaxMessageTokens, 1, maxSegmentTokens)
	p.intRange(path+".prompt_tokens", r.PromptTokens, 1, max(r.MaxMessageTokens, 1))
	p.intRange(path+".output_tokens", r.OutputTokens, 1, max(r.MaxMessageTokens, 1))
	p.oneOf(path+".length_dist", r.LengthDist, DistLogNormal, DistExponential, DistConstant)
	if r.LengthDist == DistLogNormal {
		p.floatRange(path+".prompt_sigma", r.PromptSigma, 1e-6, 4)
		p.floatRange(path+".output_sigma", r.OutputSigma, 1e-6, 4)
	}
	p.intRange(path+".system_prompts", r.SystemPrompts, 0, 1_000_000)
	if r.SystemPrompts > 0 {
		p.intRange(path+".system_prompt_tokens", r.SystemPromptTokens, 1, maxSegmentTokens)
	}
	p.think(path, r)
}

func (p *problems) shareGPT(path string, r WorkloadConfig) {
	p.path(path, r)
	p.oneOf(path+".mode", r.Mode, ModeSingle, ModeMultiTurn)
	p.intRange(path+".min_tokens", r.MinTokens, 1, maxSegmentTokens)
	p.intRange(path+".max_prompt_tokens", r.MaxPromptTokens, max(r.MinTokens, 1), 16*maxSegmentTokens)
	p.intRange(path+".max_total_tokens", r.MaxTotalTokens, max(r.MaxPromptTokens, 1)+1, 16*maxSegmentTokens)
	p.intRange(path+".output_tokens", r.OutputTokens, 0, maxSegmentTokens)
	p.intRange(path+".max_turns", r.MaxTurns, 0, maxTurnsLimit)
	if r.Mode == ModeMultiTurn {
		p.think(path, r)
	}
}

func (p *problems) think(path string, r WorkloadConfig) {
	if r.ThinkTime < 0 || r.ThinkTime > maxThinkTime {
		p.add(path+".think_time", "must be in 0..%v, got %v", maxThinkTime, r.ThinkTime)
	}
	if r.ThinkDist != "" {
		p.oneOf(path+".think_dist", r.ThinkDist, DistConstant, DistExponential)
	}
}

func (p *problems) mix(path string, raw, r WorkloadConfig) {
	if len(r.Tenants) == 0 || len(r.Tenants) > maxTenants {
		p.add(path+".tenants", "must list 1..%d tenants, got %d", maxTenants, len(r.Tenants))
	}
	seen := map[string]bool{}
	for i, t := range r.Tenants {
		tp := fmt.Sprintf("%s.tenants[%d]", path, i)
		if !validName(t.Name) {
			p.add(tp+".name", "must be non-empty letters, digits, '.', '_' or '-', got %q", t.Name)
		} else if seen[t.Name] {
			p.add(tp+".name", "duplicate tenant %q", t.Name)
		}
		seen[t.Name] = true
		if t.Workload.Kind == KindMix {
			p.add(tp+".workload.kind", "a tenant cannot be a mix")
			continue
		}
		p.workload(tp+".workload", raw.Tenants[i].Workload, t.Workload)
		if t.Arrival != nil {
			if raw.Tenants[i].Weight != 0 {
				p.add(tp+".weight", "not used by a tenant with its own arrival")
			}
			p.arrival(tp+".arrival", *t.Arrival, t.Workload)
			if len(t.Arrival.Stages) > 0 {
				p.add(tp+".arrival.stages", "only the top-level arrival may have stages")
			}
		} else {
			p.floatRange(tp+".weight", t.Weight, 1e-9, 1e9)
		}
	}
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-", c)
		if !ok {
			return false
		}
	}
	return true
}

// arrival checks a resolved arrival process used by workload w.
func (p *problems) arrival(path string, a ArrivalConfig, w WorkloadConfig) {
	procs := []string{string(ProcessPoisson), string(ProcessGamma), string(ProcessConstant),
		string(ProcessImmediate), string(ProcessTrace)}
	if !slices.Contains(procs, string(a.Process)) {
		p.oneOf(path+".process", string(a.Process), procs...)
		return
	}
	rated := a.Process == ProcessPoisson || a.Process == ProcessGamma || a.Process == ProcessConstant
	switch {
	case len(a.Stages) > 0:
		p.stages(path, a, rated)
	case rated:
		p.floatRange(path+".rate", a.Rate, 1e-9, maxRate)
	case a.Rate != 0:
		p.add(path+".rate", "not used by process %s", a.Process)
	}
	if len(a.Stages) == 0 && (a.Drain != nil || a.StageInterval != 0) {
		p.add(path+".stages", "drain and stage_interval need stages")
	}
	if a.Process == ProcessGamma {
		p.floatRange(path+".burstiness", a.Burstiness, 1e-3, 1e3)
	} else if a.Burstiness != 0 {
		p.add(path+".burstiness", "only used by process gamma")
	}
	if a.Process == ProcessTrace {
		p.floatRange(path+".time_scale", a.TimeScale, 1e-6, 1e6)
		p.traceKinds(path, w)
	} else if a.TimeScale != 0 {
		p.add(path+".time_scale", "only used by process trace")
	}
	if a.Normalize && !rated {
		p.add(path+".normalize", "only used by processes poisson, gamma and constant")
	}
}

// stages checks a staged arrival process: a rated process, no top-level rate, and every
// stage's rate and duration in range.
func (p *problems) stages(path string, a ArrivalConfig, rated bool) {
	if !rated {
		p.add(path+".stages", "need process poisson, gamma or constant, not %s", a.Process)
	}
	if a.Rate != 0 {
		p.add(path+".rate", "not used with stages (each stage has its rate)")
	}
	if a.Normalize {
		p.add(path+".normalize", "not used with stages")
	}
	if len(a.Stages) > maxStages {
		p.add(path+".stages", "at most %d stages, got %d", maxStages, len(a.Stages))
	}
	if a.StageInterval < 0 || a.StageInterval > maxThinkTime {
		p.add(path+".stage_interval", "must be in 0..%v, got %v", maxThinkTime, a.StageInterval)
	}
	if a.Drain != nil && !*a.Drain && a.StageInterval != 0 {
		p.add(path+".stage_interval", "only used when stages drain")
	}
	for i, st := range a.Stages {
		sp := fmt.Sprintf("%s.stages[%d]", path, i)
		p.floatRange(sp+".rate", st.Rate, 1e-9, maxRate)
		if st.Duration <= 0 || st.Duration > maxStageDuration {
			p.add(sp+".duration", "must be in 1ns..%v, got %v", maxStageDuration, st.Duration)
		} else if n := st.Rate * st.Duration.Seconds(); n > maxPrompts {
			p.add(sp, "rate × duration must be at most %d requests, got %.0f", maxPrompts, n)
		}
	}
}

// traceKinds checks that every source a trace arrival times has timestamps.
func (p *problems) traceKinds(path string, w WorkloadConfig) {
	if w.Kind != KindMix {
		if w.Kind != KindMooncake && w.Kind != KindAzure {
			p.add(path+".process", "trace needs a trace workload (mooncake or azure), not %s", w.Kind)
		}
		return
	}
	for i, t := range w.Tenants {
		if t.Arrival == nil && t.Workload.Kind != KindMooncake && t.Workload.Kind != KindAzure {
			p.add(path+".process", "trace needs trace workloads, but tenant %d (%s) is %s and has no arrival of its own",
				i, t.Name, t.Workload.Kind)
		}
	}
}
