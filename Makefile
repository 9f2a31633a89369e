# GoNet. `make test` is what CI runs (.ci/run). Most tests need root: they
# make network namespaces and TAP devices, skip without them, and fail
# instead under CI=true.

GO       ?= go
FUZZTIME ?= 60s

# The steps of test run in order even under make -j.
.NOTPARALLEL:

.PHONY: test fmt vet race allocs fuzz-short fuzz build demo bench bench-quick clean

## test: the full suite: formatting, vet, race-enabled tests, allocation
## checks (which need the race detector off), 5s per fuzz target, and the
## benchmark suite's smoke run (under a minute)
test: fmt vet race allocs fuzz-short bench-quick

fmt:
	@files="$$(gofmt -l .)"; \
	if [ -n "$$files" ]; then echo "gofmt -l: not formatted:"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet ./...

race:
	$(GO) test -race -count=1 -timeout 30m ./...

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

## bench: the benchmark suite (issue 5; root; about 47 minutes on 2 cores, and up
## to 4 more when other processes keep the CPUs busy, which it waits out):
## GoNet against gVisor netstack and the Linux kernel, every workload 3 times,
## the IPv6 variants of ping, bulk and request-response 5 times with GoNet's
## IPv4 twins (issue 12; about 6 minutes), issue 16's workloads (about 4),
## GoNet's gateway daemon against pasta and slirp4netns (issue 11; about 7),
## two stacks in two processes over rings, a bridge, TAPs and veth
## (issue 13, the multikernel family; about 4), and the three stacks over
## emulated wide-area paths (issue 16, the paths family; about 9);
## writes BENCHMARKS.md and bench/results/ (JSON, plots, profiles), and runs
## the stack's own Go benchmarks (allocations per packet) for the report
bench:
	cd bench && $(GO) build -o bin/gonet-bench ./cmd/gonet-bench && GO=$(GO) ./bin/gonet-bench run -out results -md ../BENCHMARKS.md

## bench-quick: the suite's smoke run (root, seconds): every stack and gateway
## set up, every workload once at its smallest size; fails unless each produced numbers
## (skips without root, but fails under CI=true, as the tests do)
bench-quick:
	cd bench && $(GO) test -count=1 ./... && $(GO) build -o bin/gonet-bench ./cmd/gonet-bench && ./bin/gonet-bench run -quick -check -skip-unavailable -out results-quick

clean:
	rm -rf bin
	rm -f cover.out coverage.out coverage.html *.coverprofile
