package workloads

import "time"

// Default values that do not depend on a preset or mode.
const (
	defaultRate             = 10.0
	defaultMeanTurns        = 3.51
	defaultMaxTurns         = 32
	defaultPromptTokens     = 161
	defaultChatOutputTokens = 338
	defaultPromptSigma      = 1.0
	defaultOutputSigma      = 0.8
	defaultMaxMessageTokens = 4096
	defaultChatSystemTokens = 1024
	defaultMinTokens        = 4
	defaultBlockTokens      = 512
	defaultStageInterval    = time.Second // inference-perf's load.interval
)

// Resolve returns c with every zero field that applies to its kind replaced by its default,
// recursively for mix tenants. Fields that do not apply stay as they are, so Validate can
// still report them. Resolve is idempotent.
func (c Config) Resolve() Config {
	c.Workload = c.Workload.resolve()
	c.Arrival = c.Arrival.resolve(c.Workload.Kind)
	return c
}

func (w WorkloadConfig) resolve() WorkloadConfig {
	if w.Kind == "" {
		w.Kind = KindSharedPrefix
	}
	switch w.Kind {
	case KindSharedPrefix:
		w = w.resolveSharedPrefix()
	case KindSyntheticChat:
		w = w.resolveSyntheticChat()
	case KindShareGPT:
		w = w.resolveShareGPT()
	case KindMooncake:
		setDefault(&w.BlockTokens, defaultBlockTokens)
	case KindChatPrefixes:
		w = w.resolveChatPrefixes()
	case KindMix:
		tenants := make([]TenantConfig, len(w.Tenants))
		for i, t := range w.Tenants {
			t.Workload = t.Workload.resolve()
			if t.Arrival != nil {
				a := t.Arrival.resolve(t.Workload.Kind)
				t.Arrival = &a
			} else if t.Weight == 0 {
				t.Weight = 1
			}
			tenants[i] = t
		}
		w.Tenants = tenants
	}
	return w
}

func (w WorkloadConfig) resolveSharedPrefix() WorkloadConfig {
	if w.Preset == "" {
		w.Preset = PresetSGLang
	}
	groups, prompts, sys, question, output, repeat := 64, 16, 2048, 128, 256, false
	if w.Preset == PresetInferencePerf {
		groups, prompts, sys, question, output, repeat = 10, 10, 100, 50, 50, true
	}
	setDefault(&w.Groups, groups)
	setDefault(&w.PromptsPerGroup, prompts)
	setDefault(&w.SystemPromptTokens, sys)
	setDefault(&w.QuestionTokens, question)
	setDefault(&w.OutputTokens, output)
	setDefault(&w.Turns, 1)
	if w.Repeat == nil {
		w.Repeat = &repeat
	}
	if w.Turns > 1 && w.ThinkDist == "" {
		w.ThinkDist = DistConstant
	}
	return w
}

func (w WorkloadConfig) resolveSyntheticChat() WorkloadConfig {
	setDefault(&w.MeanTurns, defaultMeanTurns)
	setDefault(&w.MaxTurns, defaultMaxTurns)
	setDefault(&w.PromptTokens, defaultPromptTokens)
	setDefault(&w.OutputTokens, defaultChatOutputTokens)
	w = w.resolveMessageLengths()
	if w.SystemPrompts > 0 {
		setDefault(&w.SystemPromptTokens, defaultChatSystemTokens)
	}
	setDefault(&w.ThinkDist, DistConstant)
	return w
}

func (w WorkloadConfig) resolveShareGPT() WorkloadConfig {
	setDefault(&w.Mode, ModeSingle)
	if w.Shuffle == nil {
		shuffle := true
		w.Shuffle = &shuffle
	}
	setDefault(&w.MinTokens, defaultMinTokens)
	if w.Mode == ModeMultiTurn {
		setDefault(&w.MaxPromptTokens, 6144)
		setDefault(&w.MaxTotalTokens, 8192)
		setDefault(&w.ThinkDist, DistConstant)
	} else {
		setDefault(&w.MaxPromptTokens, 1024)
		setDefault(&w.MaxTotalTokens, 2048)
	}
	return w
}

func (a ArrivalConfig) resolve(kind Kind) ArrivalConfig {
	if a.Process == "" {
		a.Process = ProcessPoisson
		if kind == KindMooncake || kind == KindAzure {
			a.Process = ProcessTrace
		}
	}
	if len(a.Stages) == 0 {
		a.Stages = nil // `stages: []` is no stages
	} else {
		if a.Drain == nil {
			drain := true
			a.Drain = &drain
		}
		if *a.Drain {
			setDefault(&a.StageInterval, defaultStageInterval)
		}
	}
	switch a.Process {
	case ProcessPoisson, ProcessConstant:
		if len(a.Stages) == 0 {
			setDefault(&a.Rate, defaultRate)
		}
	case ProcessGamma:
		if len(a.Stages) == 0 {
			setDefault(&a.Rate, defaultRate)
		}
		setDefault(&a.Burstiness, 1)
	case ProcessTrace:
		setDefault(&a.TimeScale, 1)
	}
	return a
}

// setDefault sets *p to def when *p is the zero value.
func setDefault[T int | float64 | string | time.Duration](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// resolveMessageLengths defaults the message-length distribution shared by the conversation
// kinds (synthetic-chat, chat-prefixes): log-normal with ShareGPT's spreads, capped.
func (w WorkloadConfig) resolveMessageLengths() WorkloadConfig {
	setDefault(&w.LengthDist, DistLogNormal)
	if w.LengthDist == DistLogNormal {
		setDefault(&w.PromptSigma, defaultPromptSigma)
		setDefault(&w.OutputSigma, defaultOutputSigma)
	}
	setDefault(&w.MaxMessageTokens, defaultMaxMessageTokens)
	return w
}
