package workloads

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"time"
)

// Option adjusts how Build makes a stream.
type Option func(*options)

type options struct {
	tok  Tokenizer
	open func(path string) (io.ReadCloser, error)
	text bool
}

// WithTokenizer sets the tokenizer that turns dataset text (ShareGPT) and live answers into
// token ids; the default is DefaultTokenizer. The cmd layer passes the project's tiktoken.
func WithTokenizer(t Tokenizer) Option {
	return func(o *options) {
		if t != nil {
			o.tok = t
		}
	}
}

// WithOpener sets how dataset and trace paths are opened; the default is os.Open. Shuffled
// ShareGPT needs the returned file to implement io.ReaderAt and io.Seeker, as *os.File does.
func WithOpener(open func(path string) (io.ReadCloser, error)) Option {
	return func(o *options) {
		if open != nil {
			o.open = open
		}
	}
}

// WithText sets whether requests carry Text and Messages (default true). Without them only
// token ids are produced, which saves the time and memory of generating synthetic text.
func WithText(on bool) Option {
	return func(o *options) { o.text = on }
}

// Build validates cfg and returns its request stream. The same cfg, seed and options give
// the same requests, in the same order, with the same IDs, text and tokens. Close the stream
// to release its files.
func Build(cfg Config, seed uint64, opts ...Option) (*Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := cfg.Resolve()
	o := options{tok: DefaultTokenizer(), open: openFile, text: true}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Stream{
		waiting:     map[string]*session{},
		tok:         o.tok,
		text:        o.text,
		maxRequests: cfg.Requests,
		maxDuration: cfg.Duration,
	}
	if err := s.addLanes(r, seed, &o); err != nil {
		return nil, errors.Join(err, s.closeSources())
	}
	return s, nil
}

func openFile(path string) (io.ReadCloser, error) { return os.Open(path) }

// addLanes builds every tenant's source and groups them into lanes: one shared lane for
// the tenants that split the top-level arrival process by weight, one lane per tenant with
// its own process, and one per tenant replaying trace timestamps.
func (s *Stream) addLanes(r Config, seed uint64, o *options) error {
	specs := []TenantConfig{{Weight: 1, Workload: r.Workload}}
	if r.Workload.Kind == KindMix {
		specs = r.Workload.Tenants
	}
	shared := &lane{choice: newRand(seed, tagChoice)}
	var own []*lane
	for _, spec := range specs {
		t, err := newTenant(spec, seed, o)
		if err != nil {
			return err
		}
		s.tenants = append(s.tenants, t)
		name := hashString(spec.Name)
		switch {
		case spec.Arrival != nil:
			own = append(own, newLane(*spec.Arrival, newRand(seed, tagArrival, name), r.Requests, t))
		case r.Arrival.Process == ProcessTrace:
			own = append(own, newLane(r.Arrival, nil, 0, t))
		default:
			shared.tenants = append(shared.tenants, t)
			shared.weights = append(shared.weights, spec.Weight)
		}
	}
	if len(shared.tenants) > 0 {
		shared.arr = newArrivals(r.Arrival, newRand(seed, tagArrival), r.Requests)
		if st, ok := shared.arr.(*stagedArrivals); ok {
			shared.staged, shared.stage = st, -1
			s.staged = st
		}
		s.lanes = append(s.lanes, shared)
	}
	s.lanes = append(s.lanes, own...)
	return nil
}

func newTenant(spec TenantConfig, seed uint64, o *options) (*tenant, error) {
	w := spec.Workload
	src, err := newSource(w, deriveSeed(seed, tagTenant, hashString(spec.Name)), o)
	if err != nil {
		return nil, err
	}
	t := &tenant{name: spec.Name, src: src, thinkTime: w.ThinkTime, thinkExp: w.ThinkDist == DistExponential}
	if spec.Name != "" {
		t.prefix = spec.Name + "/"
	}
	t.multi = w.Kind == KindSyntheticChat || (w.Kind == KindSharedPrefix && w.Turns > 1) ||
		(w.Kind == KindShareGPT && w.Mode == ModeMultiTurn) || w.Kind == KindChatPrefixes || w.Concurrency > 0
	return t, nil
}

func newSource(w WorkloadConfig, seed uint64, o *options) (source, error) {
	switch w.Kind {
	case KindSharedPrefix:
		if w.Concurrency > 0 {
			return newClients(newSharedPrefix(w, seed, o.text), w.Concurrency, 0, seed), nil
		}
		return newSharedPrefix(w, seed, o.text), nil
	case KindSyntheticChat:
		return newSyntheticChat(w, seed, o.text), nil
	case KindShareGPT:
		return nonEmpty(newShareGPTSource(w, seed, o))
	case KindMooncake:
		return nonEmpty(newMooncakeSource(w, seed, o))
	case KindAzure:
		return nonEmpty(newAzureSource(w, seed, o))
	case KindChatPrefixes:
		return newChatPrefixClients(w, seed, o.text), nil
	}
	return nil, errors.New("workloads: unknown kind " + string(w.Kind)) // Validate prevents this
}

// lane produces session starts in arrival order for one or more tenants.
type lane struct {
	tenants []*tenant
	weights []float64
	arr     arrivals   // nil: the sources' own timestamps
	scale   float64    // multiplies trace timestamps
	choice  *rand.Rand // picks the tenant of each arrival in a shared lane
	head    *pending   // &slot when the lane holds a first turn, nil otherwise
	slot    pending
	done    bool
	staged  *stagedArrivals // arr, when it is staged
	stage   int             // the stage of the last arrival, to restart sources at a new one
}

// newLane returns a lane for one tenant: trace timestamps when a is a trace process.
func newLane(a ArrivalConfig, r *rand.Rand, normalizeN int, t *tenant) *lane {
	l := &lane{tenants: []*tenant{t}, weights: []float64{1}}
	if a.Process == ProcessTrace {
		l.scale = a.TimeScale
	} else {
		l.arr = newArrivals(a, r, normalizeN)
	}
	return l
}

// fill builds the lane's next first turn unless it has one or is done.
func (l *lane) fill(s *Stream) error {
	if l.head != nil || l.done {
		return nil
	}
	var at time.Duration
	if l.arr != nil {
		var st arrivalState
		if at, st = l.arr.next(); st != arrivalReady {
			l.done = st == arrivalOver
			return nil
		}
		l.newStage()
	}
	for {
		t := l.pick()
		if t == nil {
			l.done = true
			return nil
		}
		conv, err := t.src.next()
		if errors.Is(err, io.EOF) {
			t.exhausted = true
			continue
		}
		if err != nil {
			return err
		}
		if l.arr == nil {
			at = scaleDuration(conv.at, l.scale)
		}
		if s.maxDuration > 0 && at >= s.maxDuration {
			l.done = true
			return nil
		}
		sess := newSession(s.takeSession(), t, conv, s.text)
		l.slot = pending{req: sess.next(at, s.text), sess: sess}
		l.head = &l.slot
		return nil
	}
}

// newStage restarts the lane's sources that cycle when its staged arrivals entered a new
// stage, as inference-perf numbers each stage's requests from 0.
func (l *lane) newStage() {
	if l.staged == nil || l.staged.stage() == l.stage {
		return
	}
	l.stage = l.staged.stage()
	for _, t := range l.tenants {
		if r, ok := t.src.(restarter); ok {
			r.restart()
		}
	}
}

// restarter is a source whose order starts again with each arrival stage.
type restarter interface{ restart() }

// pick returns the tenant of the next arrival, by weight among those not exhausted.
func (l *lane) pick() *tenant {
	if len(l.tenants) == 1 {
		if l.tenants[0].exhausted {
			return nil
		}
		return l.tenants[0]
	}
	total := 0.0
	for i, t := range l.tenants {
		if !t.exhausted {
			total += l.weights[i]
		}
	}
	if total == 0 {
		return nil
	}
	u := l.choice.Float64() * total
	var last *tenant
	for i, t := range l.tenants {
		if t.exhausted {
			continue
		}
		last = t
		if u < l.weights[i] {
			return t
		}
		u -= l.weights[i]
	}
	return last
}
