# jobfabric: `make test` is what CI runs (.ci/run).
GO ?= go
PKGS := ./...

.PHONY: test build bench fmt vet lint openapi

test: fmt-check vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

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
