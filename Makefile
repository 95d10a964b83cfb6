# jobfabric: `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test build bench fmt vet lint openapi fuzz chaos

# The suite, the chaos check among it (internal/chaos, about a minute), then
# a short pass of every fuzz target beyond its committed seeds.
test: fmt-check vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_CI)

# Go native fuzz targets, package:target. `go test -fuzz` runs one target
# of one package at a time; FUZZTIME each (FUZZTIME_CI in `make test`).
# A failing input is written under the package's testdata/fuzz/TARGET:
# fix the code, keep the file as the regression seed (.ci/fuzz).
FUZZ_TARGETS := \
	./internal/server:FuzzAPIWrite \
	./internal/topology:FuzzTopology \
	./internal/fabric/platform:FuzzParse \
	./internal/hostfacts:FuzzParseQueryXML \
	./internal/hostfacts:FuzzParseQueryText \
	./internal/hostfacts:FuzzParseList \
	./internal/hostfacts:FuzzParseLGI \
	./internal/hostfacts:FuzzParseMIGMinors \
	./internal/hostfacts:FuzzParseTopo \
	./internal/hostfacts:FuzzParseNVLinkStatus \
	./internal/hostfacts:FuzzParseIBStat \
	./internal/mig:FuzzParseLGIP \
	./internal/telemetry:FuzzPush
FUZZTIME ?= 30s
FUZZTIME_CI ?= 5s
FUZZPARALLEL ?= 1
FUZZMINIMIZE ?= 200x

fuzz:
	@GO=$(GO) FUZZMINIMIZE=$(FUZZMINIMIZE) .ci/fuzz $(FUZZTIME) $(FUZZPARALLEL) $(FUZZ_TARGETS)

# The linearizability check of the job API under leader kills, alone
# (`make test` runs it with the rest).
chaos:
	$(GO) test -race -count=1 -timeout 10m -v -run 'TestJobAPILinearizable|TestChaosCatchesStaleReads|TestModel' ./internal/chaos

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# A release sets VERSION (make build VERSION=v1.2.3); otherwise the binary
# reports the module version and VCS revision the toolchain records.
VERSION ?=
build:
	$(GO) build -ldflags "-X github.com/jobfabric/jobfabric/internal/version.version=$(VERSION)" -o bin/jobfabric ./cmd/jobfabric

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cmd/jobfabric bench submit --servers 1 --runs 3
	$(GO) run ./cmd/jobfabric bench submit --servers 3 --runs 3

# Rewrite the doc comments and enums extracted from the sources, then (with
# them compiled in) the committed OpenAPI document from the route table.
openapi:
	$(GO) test ./internal/server -run '^TestOpenAPISources$$' -update
	$(GO) test ./internal/server -run '^TestOpenAPIDocument$$' -update
