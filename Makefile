# kvroute — developer entry points. `make test` is what CI runs (.ci/run).
GO ?= go
PKGS ?= ./...
BENCH ?= .
BENCHTIME ?= 1s
COUNT ?= 1

.PHONY: test fmt-check vet unit bench smoke

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

# End-to-end contract checks of the commands (needs ../shared/checks/smoke).
smoke:
	../shared/checks/smoke all
