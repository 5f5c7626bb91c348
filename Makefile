# kvroute — developer entry points. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS ?= ./...
BENCH ?= .
BENCHTIME ?= 1s
COUNT ?= 1

.PHONY: test fmt-check vet unit bench

test: fmt-check vet unit

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

# Benchmarks: `make bench BENCH=Pick PKGS=./router COUNT=10 > new.txt`, then benchstat old.txt new.txt.
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) -count $(COUNT) $(PKGS)

# Published-result fidelity at full size (README "Fidelity"); CI runs reduced copies through
# `go test ./cmd/simulate` (TestPublishedFidelityDirections).
.PHONY: fidelity
fidelity:
	$(GO) run ./cmd/simulate -config examples/published/sglang-v0.4.yaml -out out/fid-sglang -quiet
	$(GO) run ./cmd/simulate -config examples/published/sglang-v0.4-5-per-group.yaml -out out/fid-sglang-5 -quiet
	$(GO) run ./cmd/simulate -config examples/published/llm-d-kv-cache-wins.yaml -out out/fid-llm-d -quiet
	$(GO) run ./cmd/simulate -config examples/published/kubeai-prefix-hash.yaml -out out/fid-kubeai -quiet
	$(GO) run ./cmd/simulate -config examples/published/llm-d-tiered-prefix-cache.yaml -out out/fid-tier -quiet
	$(GO) run ./cmd/simulate -config examples/published/llm-d-pd-disaggregation.yaml -out out/fid-pd-llm-d -quiet
	$(GO) run ./cmd/simulate -config examples/published/distserve-2p1d.yaml -out out/fid-pd-distserve -quiet
	$(GO) run ./cmd/simulate -config examples/published/distserve-colocated-v0.yaml -out out/fid-pd-distserve-v0 -quiet
	$(GO) test ./cmd/simulate -count=1 -v -run TestPublishedPDFidelity
	$(GO) test ./internal/calibrate -count=1 -v -run TestWorkloadCalibration
