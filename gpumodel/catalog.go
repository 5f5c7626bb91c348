package gpumodel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors for catalog lookups and additions.
var (
	// ErrUnknownGPU is returned (wrapped) when no GPU has the requested name or alias.
	ErrUnknownGPU = errors.New("gpumodel: unknown gpu")
	// ErrUnknownModel is returned (wrapped) when no model has the requested name or alias.
	ErrUnknownModel = errors.New("gpumodel: unknown model")
	// ErrDuplicate is returned (wrapped) when an added entry's name or alias is taken.
	ErrDuplicate = errors.New("gpumodel: duplicate catalog name")
)

// Catalog is a set of GPUs and models addressable by name or alias,
// case-insensitively. The zero value is empty; DefaultCatalog holds the
// built-in presets and LoadCatalog adds a user's file to them. A Catalog is a
// value: copies share nothing that Add* mutates.
type Catalog struct {
	gpus   []GPU
	models []Model
	// builtinGPUs and builtinModels count the leading entries that came from
	// DefaultCatalog; WriteJSON skips them.
	builtinGPUs, builtinModels int
}

// DefaultCatalog returns the built-in GPUs (A100-40GB-SXM, A100-80GB-SXM,
// H100-SXM-80GB, H100-PCIe-80GB, H200-SXM-141GB, L40S, L4) and models (Llama-3.1-8B,
// Llama-3.1-70B, Qwen2.5-7B, Mistral-7B, Llama-2-7B, Llama-2-13B, Llama-2-70B, Qwen3-14B,
// Qwen3-32B, Llama-3.1-8B-FP8, gpt-oss-120b, gpt-oss-20b).
func DefaultCatalog() Catalog {
	c := Catalog{
		gpus:   []GPU{A100SXM40GB(), A100SXM80GB(), H100SXM80GB(), H100PCIe80GB(), H200SXM141GB(), L40S(), L4()},
		models: []Model{Llama31x8B(), Llama31x70B(), Qwen25x7B(), Mistral7B(), Llama2x7B(), Llama2x13B(), Llama2x70B(), Qwen3x14B(), Qwen3x32B(), Llama31x8BFP8(), GptOss120B(), GptOss20B()},
	}
	c.builtinGPUs, c.builtinModels = len(c.gpus), len(c.models)
	return c
}

// LookupGPU returns the built-in GPU called name (or one of its aliases),
// ignoring case, or an error wrapping ErrUnknownGPU.
func LookupGPU(name string) (GPU, error) {
	return DefaultCatalog().GPU(name)
}

// LookupModel returns the built-in model called name (or one of its aliases,
// such as a Hugging Face id), ignoring case, or an error wrapping ErrUnknownModel.
func LookupModel(name string) (Model, error) {
	return DefaultCatalog().Model(name)
}

// normalize folds a name for comparison: trimmed, lower case, '_' as '-'.
func normalize(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-")
}

func matches(want, name string, aliases []string) bool {
	if normalize(name) == want {
		return true
	}
	for _, a := range aliases {
		if normalize(a) == want {
			return true
		}
	}
	return false
}

// GPU returns the GPU called name or one of its aliases, ignoring case.
func (c Catalog) GPU(name string) (GPU, error) {
	want := normalize(name)
	for _, g := range c.gpus {
		if matches(want, g.Name, g.Aliases) {
			g.Aliases = slices.Clone(g.Aliases)
			return g, nil
		}
	}
	return GPU{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownGPU, name, strings.Join(gpuNames(c.gpus), ", "))
}

// Model returns the model called name or one of its aliases, ignoring case.
func (c Catalog) Model(name string) (Model, error) {
	want := normalize(name)
	for _, m := range c.models {
		if matches(want, m.Name, m.Aliases) {
			m.Aliases = slices.Clone(m.Aliases)
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownModel, name, strings.Join(modelNames(c.models), ", "))
}

// GPUs returns a copy of the catalog's GPUs, built-ins first.
func (c Catalog) GPUs() []GPU {
	out := make([]GPU, len(c.gpus))
	for i, g := range c.gpus {
		g.Aliases = slices.Clone(g.Aliases)
		out[i] = g
	}
	return out
}

// Models returns a copy of the catalog's models, built-ins first.
func (c Catalog) Models() []Model {
	out := make([]Model, len(c.models))
	for i, m := range c.models {
		m.Aliases = slices.Clone(m.Aliases)
		out[i] = m
	}
	return out
}

// AddGPU validates g and adds it. It returns an error wrapping ErrDuplicate
// when g's name or an alias already names a GPU.
func (c *Catalog) AddGPU(g GPU) error {
	if err := g.Validate(); err != nil {
		return err
	}
	for _, n := range append([]string{g.Name}, g.Aliases...) {
		if _, err := c.GPU(n); err == nil {
			return fmt.Errorf("%w: gpu %q (name or alias %q is taken)", ErrDuplicate, g.Name, n)
		}
	}
	g.Aliases = slices.Clone(g.Aliases)
	c.gpus = append(c.gpus[:len(c.gpus):len(c.gpus)], g) // never write into a shared array
	return nil
}

// AddModel validates m and adds it. It returns an error wrapping ErrDuplicate
// when m's name or an alias already names a model.
func (c *Catalog) AddModel(m Model) error {
	if err := m.Validate(); err != nil {
		return err
	}
	for _, n := range append([]string{m.Name}, m.Aliases...) {
		if _, err := c.Model(n); err == nil {
			return fmt.Errorf("%w: model %q (name or alias %q is taken)", ErrDuplicate, m.Name, n)
		}
	}
	m.Aliases = slices.Clone(m.Aliases)
	c.models = append(c.models[:len(c.models):len(c.models)], m)
	return nil
}

func gpuNames(gs []GPU) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}

func modelNames(ms []Model) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
