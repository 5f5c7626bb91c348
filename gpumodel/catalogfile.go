package gpumodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// maxCatalogBytes bounds the catalog files LoadCatalog reads.
const maxCatalogBytes = 16 << 20

// CatalogError reports a problem in a catalog file: where it is and what is wrong.
type CatalogError struct {
	// File is the name given to LoadCatalog.
	File string
	// Line is the 1-based line of the problem or of the entry holding it; 0 if unknown.
	Line int
	// Entry names the entry, such as `gpus[1] "my-gpu"`; empty for file-level problems.
	Entry string
	// Err is the underlying problem.
	Err error
}

// Error formats e as "gpumodel: catalog FILE line N: ENTRY: problem".
func (e *CatalogError) Error() string {
	s := "gpumodel: catalog " + e.File
	if e.Line > 0 {
		s += fmt.Sprintf(" line %d", e.Line)
	}
	if e.Entry != "" {
		s += ": " + e.Entry
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying problem.
func (e *CatalogError) Unwrap() error { return e.Err }

// gpuSpec is one GPU in a catalog file, in the units people write.
// Pointer fields are optional when Base names a GPU to start from.
type gpuSpec struct {
	Name                string      `json:"name"`
	Base                string      `json:"base,omitempty"`
	Aliases             []string    `json:"aliases,omitempty"`
	PeakTFLOPS          *float64    `json:"peak_tflops,omitempty"`
	PeakFP8TFLOPS       *float64    `json:"peak_fp8_tflops,omitempty"`
	MemoryGiB           *float64    `json:"memory_gib,omitempty"`
	MemoryBandwidthTBps *float64    `json:"memory_bandwidth_tbps,omitempty"`
	LinkBandwidthGBps   *float64    `json:"link_bandwidth_gbps,omitempty"`
	LinkLatencyMicros   *float64    `json:"link_latency_us,omitempty"`
	CustomARMicros      *float64    `json:"custom_all_reduce_latency_us,omitempty"`
	HostBandwidthGBps   *float64    `json:"host_bandwidth_gbps,omitempty"`
	NICGbps             *float64    `json:"nic_gbps,omitempty"`
	Efficiency          *efficiency `json:"efficiency,omitempty"`
}

type efficiency struct {
	PrefillMFU *float64 `json:"prefill_mfu,omitempty"`
	DecodeMFU  *float64 `json:"decode_mfu,omitempty"`
	Memory     *float64 `json:"memory,omitempty"`
	Link       *float64 `json:"link,omitempty"`
	ExpertMFU  *float64 `json:"expert_mfu,omitempty"`
}

// modelSpec is one model in a catalog file.
type modelSpec struct {
	Name            string   `json:"name"`
	Base            string   `json:"base,omitempty"`
	Aliases         []string `json:"aliases,omitempty"`
	Layers          *int     `json:"layers,omitempty"`
	Hidden          *int     `json:"hidden,omitempty"`
	Heads           *int     `json:"heads,omitempty"`
	KVHeads         *int     `json:"kv_heads,omitempty"`
	HeadDim         *int     `json:"head_dim,omitempty"`
	Intermediate    *int     `json:"intermediate,omitempty"`
	Vocab           *int     `json:"vocab,omitempty"`
	Params          *int64   `json:"params,omitempty"`
	DTypeBytes      *int     `json:"dtype_bytes,omitempty"`
	Quantization    *string  `json:"quantization,omitempty"`
	TiedEmbeddings  *bool    `json:"tied_embeddings,omitempty"`
	Experts         *int     `json:"experts,omitempty"`
	ExpertsPerToken *int     `json:"experts_per_token,omitempty"`
	SlidingWindow   *int     `json:"sliding_window,omitempty"`
	SlidingLayers   *int     `json:"sliding_layers,omitempty"`
}

// LoadCatalog reads a JSON catalog file and returns DefaultCatalog plus its
// entries. name labels errors (usually the file path). The file is an object
// with optional "gpus" and "models" arrays; see testdata/catalog_example.json.
// Decoding is strict: unknown fields, wrong types, trailing data, missing
// required fields, invalid values and duplicate names are errors of type
// *CatalogError naming the line and entry. An entry with "base" starts from
// that catalog entry and overrides only the fields it sets. YAML callers
// (cmd/) convert to JSON first; this package imports only the standard library.
func LoadCatalog(r io.Reader, name string) (Catalog, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCatalogBytes+1))
	if err != nil {
		return Catalog{}, &CatalogError{File: name, Err: err}
	}
	if len(data) > maxCatalogBytes {
		return Catalog{}, &CatalogError{File: name, Err: fmt.Errorf("file exceeds %d bytes", maxCatalogBytes)}
	}
	l := loader{file: name, data: data, cat: DefaultCatalog()}
	if err := l.load(); err != nil {
		return Catalog{}, err
	}
	if len(l.errs) > 0 {
		return Catalog{}, errors.Join(l.errs...)
	}
	return l.cat, nil
}

type loader struct {
	file string
	data []byte
	dec  *json.Decoder
	cat  Catalog
	errs []error // validation problems, reported together
}

// fail wraps err with the file name and the line of byte offset off.
func (l *loader) fail(off int64, entry string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		err = fmt.Errorf("field %q: cannot use JSON %s as %s", te.Field, te.Value, te.Type)
	}
	line := lineAt(l.data, l.valueStart(off))
	if n, ok := l.unknownFieldLine(err, off); ok {
		line, err = n, errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return &CatalogError{File: l.file, Line: line, Entry: entry, Err: err}
}

// valueStart skips the separators between off and the next JSON value.
func (l *loader) valueStart(off int64) int64 {
	for off < int64(len(l.data)) && strings.IndexByte(" \t\r\n,", l.data[off]) >= 0 {
		off++
	}
	return off
}

// unknownFieldLine finds the line of the field encoding/json reports as
// unknown (its error carries no offset), searching from the entry at off.
func (l *loader) unknownFieldLine(err error, off int64) (int, bool) {
	const prefix = "json: unknown field "
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) || off < 0 || off > int64(len(l.data)) {
		return 0, false
	}
	i := bytes.Index(l.data[off:], []byte(msg[len(prefix):]))
	if i < 0 {
		return 0, false
	}
	return lineAt(l.data, off+int64(i)), true
}

func lineAt(data []byte, off int64) int {
	off = min(max(off, 0), int64(len(data)))
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

func (l *loader) load() error {
	l.dec = json.NewDecoder(bytes.NewReader(l.data))
	l.dec.DisallowUnknownFields()
	if err := l.expectDelim('{'); err != nil {
		return err
	}
	for l.dec.More() {
		off := l.dec.InputOffset()
		tok, err := l.dec.Token()
		if err != nil {
			return l.fail(off, "", err)
		}
		switch key, _ := tok.(string); key {
		case "gpus":
			err = l.array(key, l.gpu)
		case "models":
			err = l.array(key, l.model)
		default:
			err = l.fail(off, "", fmt.Errorf("unknown field %q (want \"gpus\" or \"models\")", key))
		}
		if err != nil {
			return err
		}
	}
	if err := l.expectDelim('}'); err != nil {
		return err
	}
	off := l.dec.InputOffset()
	if _, err := l.dec.Token(); err != io.EOF {
		return l.fail(off, "", errors.New("trailing data after the catalog object"))
	}
	return nil
}

func (l *loader) expectDelim(want json.Delim) error {
	off := l.dec.InputOffset()
	tok, err := l.dec.Token()
	if err == io.EOF {
		return l.fail(off, "", fmt.Errorf("unexpected end of input, want %q", want))
	}
	if err != nil {
		return l.fail(off, "", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return l.fail(off, "", fmt.Errorf("got %v, want %q", tok, want))
	}
	return nil
}

// array decodes the JSON array under key, calling add for each element with
// its index and the offset where it starts.
func (l *loader) array(key string, add func(i int, off int64) error) error {
	if err := l.expectDelim('['); err != nil {
		return fmt.Errorf("%w (field %q must be an array)", err, key)
	}
	for i := 0; l.dec.More(); i++ {
		if err := add(i, l.valueStart(l.dec.InputOffset())); err != nil {
			return err
		}
	}
	return l.expectDelim(']')
}

func (l *loader) gpu(i int, off int64) error {
	var s gpuSpec
	if err := l.dec.Decode(&s); err != nil {
		return l.fail(off, fmt.Sprintf("gpus[%d]", i), err)
	}
	entry := fmt.Sprintf("gpus[%d] %q", i, s.Name)
	g, err := s.build(l.cat)
	if err == nil {
		err = checkAliases(s.Aliases)
	}
	if err == nil {
		err = l.cat.AddGPU(g)
	}
	if err != nil {
		l.errs = append(l.errs, l.fail(off, entry, err))
	}
	return nil
}

func (l *loader) model(i int, off int64) error {
	var s modelSpec
	if err := l.dec.Decode(&s); err != nil {
		return l.fail(off, fmt.Sprintf("models[%d]", i), err)
	}
	entry := fmt.Sprintf("models[%d] %q", i, s.Name)
	m, err := s.build(l.cat)
	if err == nil {
		err = checkAliases(s.Aliases)
	}
	if err == nil {
		err = l.cat.AddModel(m)
	}
	if err != nil {
		l.errs = append(l.errs, l.fail(off, entry, err))
	}
	return nil
}

func checkAliases(aliases []string) error {
	for _, a := range aliases {
		if normalize(a) == "" {
			return errors.New("aliases must not be empty strings")
		}
	}
	return nil
}

// missing collects the names of required fields an entry without base omits.
type missing []string

func (m *missing) check(field string, set bool) {
	if !set {
		*m = append(*m, field)
	}
}

func (m missing) err() error {
	if len(m) == 0 {
		return nil
	}
	return fmt.Errorf("missing required fields %q (or set \"base\" to start from a catalog entry)", []string(m))
}

func (s gpuSpec) build(c Catalog) (GPU, error) {
	var g GPU
	if s.Base != "" {
		b, err := c.GPU(s.Base)
		if err != nil {
			return GPU{}, fmt.Errorf("base: %w", err)
		}
		g = b
		g.Aliases = nil
	} else {
		var m missing
		m.check("peak_tflops", s.PeakTFLOPS != nil)
		m.check("memory_gib", s.MemoryGiB != nil)
		m.check("memory_bandwidth_tbps", s.MemoryBandwidthTBps != nil)
		m.check("link_bandwidth_gbps", s.LinkBandwidthGBps != nil)
		m.check("link_latency_us", s.LinkLatencyMicros != nil)
		e := s.Efficiency
		m.check("efficiency", e != nil)
		if e != nil {
			m.check("efficiency.prefill_mfu", e.PrefillMFU != nil)
			m.check("efficiency.decode_mfu", e.DecodeMFU != nil)
			m.check("efficiency.memory", e.Memory != nil)
			m.check("efficiency.link", e.Link != nil)
		}
		if err := m.err(); err != nil {
			return GPU{}, err
		}
	}
	g.Name, g.Aliases = s.Name, s.Aliases
	setScaled(&g.PeakFLOPS, s.PeakTFLOPS, 1e12)
	setScaled(&g.PeakFP8FLOPS, s.PeakFP8TFLOPS, 1e12)
	setScaled(&g.MemoryBandwidth, s.MemoryBandwidthTBps, 1e12)
	setScaled(&g.LinkBandwidth, s.LinkBandwidthGBps, 1e9)
	setScaled(&g.HostBandwidth, s.HostBandwidthGBps, 1e9)
	setScaled(&g.NICGbps, s.NICGbps, 1)
	if s.MemoryGiB != nil {
		if v := *s.MemoryGiB; !(v > 0 && v < 1<<30) {
			return GPU{}, fmt.Errorf("memory_gib must be in (0, 2^30), got %v", v)
		}
		g.MemoryBytes = gib(*s.MemoryGiB)
	}
	if s.LinkLatencyMicros != nil {
		if v := *s.LinkLatencyMicros; !(v >= 0 && v < 1e9) {
			return GPU{}, fmt.Errorf("link_latency_us must be in [0, 1e9), got %v", v)
		}
		g.LinkLatency = time.Duration(math.Round(*s.LinkLatencyMicros * 1e3))
	}
	if s.CustomARMicros != nil {
		if v := *s.CustomARMicros; !(v >= 0 && v < 1e9) {
			return GPU{}, fmt.Errorf("custom_all_reduce_latency_us must be in [0, 1e9), got %v", v)
		}
		g.CustomAllReduceLatency = time.Duration(math.Round(*s.CustomARMicros * 1e3))
	}
	if e := s.Efficiency; e != nil {
		setScaled(&g.Efficiency.PrefillMFU, e.PrefillMFU, 1)
		setScaled(&g.Efficiency.DecodeMFU, e.DecodeMFU, 1)
		setScaled(&g.Efficiency.Memory, e.Memory, 1)
		setScaled(&g.Efficiency.Link, e.Link, 1)
		setScaled(&g.Efficiency.ExpertMFU, e.ExpertMFU, 1)
	}
	return g, nil
}

func setScaled(dst *float64, v *float64, scale float64) {
	if v != nil {
		*dst = *v * scale
	}
}

func setInt[T int | int64](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func (s modelSpec) build(c Catalog) (Model, error) {
	var m Model
	if s.Base != "" {
		b, err := c.Model(s.Base)
		if err != nil {
			return Model{}, fmt.Errorf("base: %w", err)
		}
		m = b
	} else {
		var miss missing
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"layers", s.Layers != nil}, {"hidden", s.Hidden != nil}, {"heads", s.Heads != nil},
			{"kv_heads", s.KVHeads != nil}, {"head_dim", s.HeadDim != nil},
			{"intermediate", s.Intermediate != nil}, {"vocab", s.Vocab != nil},
			{"params", s.Params != nil}, {"dtype_bytes", s.DTypeBytes != nil},
		} {
			miss.check(f.name, f.set)
		}
		if err := miss.err(); err != nil {
			return Model{}, err
		}
	}
	m.Name, m.Aliases = s.Name, s.Aliases
	setInt(&m.Layers, s.Layers)
	setInt(&m.Hidden, s.Hidden)
	setInt(&m.Heads, s.Heads)
	setInt(&m.KVHeads, s.KVHeads)
	setInt(&m.HeadDim, s.HeadDim)
	setInt(&m.Intermediate, s.Intermediate)
	setInt(&m.Vocab, s.Vocab)
	setInt(&m.Params, s.Params)
	setInt(&m.DTypeBytes, s.DTypeBytes)
	setInt(&m.Experts, s.Experts)
	setInt(&m.ExpertsPerToken, s.ExpertsPerToken)
	setInt(&m.SlidingWindow, s.SlidingWindow)
	setInt(&m.SlidingLayers, s.SlidingLayers)
	if s.TiedEmbeddings != nil {
		m.TiedEmbeddings = *s.TiedEmbeddings
	}
	if s.Quantization != nil {
		q, err := ParseQuantization(*s.Quantization)
		if err != nil {
			return Model{}, fmt.Errorf("quantization: %w", err)
		}
		m.Quantization = q
	}
	return m, nil
}

// catalogFile is the document LoadCatalog reads and WriteJSON writes.
type catalogFile struct {
	GPUs   []gpuSpec   `json:"gpus,omitempty"`
	Models []modelSpec `json:"models,omitempty"`
}

// WriteJSON writes the entries added to the built-in catalog (by LoadCatalog,
// AddGPU or AddModel), fully expanded, in the format LoadCatalog reads. Memory
// is written in GiB and read back rounded to the MiB.
func (c Catalog) WriteJSON(w io.Writer) error {
	var f catalogFile
	for _, g := range c.gpus[min(c.builtinGPUs, len(c.gpus)):] {
		f.GPUs = append(f.GPUs, gpuSpec{
			Name: g.Name, Aliases: g.Aliases,
			PeakTFLOPS:          ptr(g.PeakFLOPS / 1e12),
			PeakFP8TFLOPS:       ptr(g.PeakFP8FLOPS / 1e12),
			MemoryGiB:           ptr(float64(g.MemoryBytes) / GiB),
			MemoryBandwidthTBps: ptr(g.MemoryBandwidth / 1e12),
			LinkBandwidthGBps:   ptr(g.LinkBandwidth / 1e9),
			LinkLatencyMicros:   ptr(float64(g.LinkLatency) / 1e3),
			CustomARMicros:      optional(float64(g.CustomAllReduceLatency) / 1e3),
			HostBandwidthGBps:   optional(g.HostBandwidth / 1e9),
			NICGbps:             optional(g.NICGbps),
			Efficiency: &efficiency{
				PrefillMFU: ptr(g.Efficiency.PrefillMFU), DecodeMFU: ptr(g.Efficiency.DecodeMFU),
				Memory: ptr(g.Efficiency.Memory), Link: ptr(g.Efficiency.Link), ExpertMFU: optional(g.Efficiency.ExpertMFU),
			},
		})
	}
	for _, m := range c.models[min(c.builtinModels, len(c.models)):] {
		f.Models = append(f.Models, modelSpec{
			Name: m.Name, Aliases: m.Aliases,
			Layers: ptr(m.Layers), Hidden: ptr(m.Hidden), Heads: ptr(m.Heads), KVHeads: ptr(m.KVHeads),
			HeadDim: ptr(m.HeadDim), Intermediate: ptr(m.Intermediate), Vocab: ptr(m.Vocab),
			Params: ptr(m.Params), DTypeBytes: ptr(m.DTypeBytes), TiedEmbeddings: ptr(m.TiedEmbeddings),
			Experts: optionalInt(m.Experts), ExpertsPerToken: optionalInt(m.ExpertsPerToken),
			SlidingWindow: optionalInt(m.SlidingWindow), SlidingLayers: optionalInt(m.SlidingLayers),
		})
	}
	for i, m := range c.models[min(c.builtinModels, len(c.models)):] {
		if m.Quantization != QuantNone {
			f.Models[i].Quantization = ptr(string(m.Quantization))
		}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("gpumodel: write catalog: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("gpumodel: write catalog: %w", err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// optionalInt returns a pointer to v, or nil for 0 (a field left out).
func optionalInt(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

// optional returns a pointer to v, or nil for 0 (a field left out).
func optional(v float64) *float64 {
	if v == 0 {
		return nil
	}
	return &v
}
