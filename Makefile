# GoNet. `make test` is what CI runs (.ci/run). Most tests need root: they
# make network namespaces and TAP devices, skip without them, and fail
# instead under CI=true.

GO       ?= go
FUZZTIME ?= 60s

# The steps of test run in order even under make -j.
.NOTPARALLEL:

.PHONY: test fmt vet race allocs fuzz-short fuzz build demo bench clean

## test: the full suite: formatting, vet, race-enabled tests, allocation
## checks (which need the race detector off), 5s per fuzz target
test: fmt vet race allocs fuzz-short

fmt:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt -l: not formatted:"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 ./...

# The race detector makes sync.Pool drop items at random, so tests that pin
# zero allocations per packet skip under -race and run here.
allocs:
	$(GO) test -count=1 -run 'Alloc' ./...

fuzz-short:
	./scripts/fuzz.sh 5s

## fuzz: every fuzz target for FUZZTIME each (make fuzz FUZZTIME=10m)
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

## build: compile everything, and the daemon into bin/gonet
build:
	$(GO) build ./...
	$(GO) build -o bin/gonet ./cmd/gonet

## demo: GoNet against the kernel in a throwaway namespace (needs root)
demo:
	$(GO) run ./cmd/gonet demo

## bench: all benchmarks, with allocations
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean:
	rm -rf bin
	rm -f cover.out coverage.out coverage.html *.coverprofile
