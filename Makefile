# The two entry points; see README.md. Both first run hack/prereqs.sh, which
# installs the packages the test world needs and builds its binaries into
# ~/.cache/flotilla (about 15 minutes the first time on 2 cores).
.PHONY: demo test

# Starts a host, three cloud member clusters and a KubeEdge member split
# into two virtual nodes, with flotilla-node and flotilla-policy; places a
# plain Deployment and a policy-divided one; runs until Ctrl-C, which exits
# 0. DEMO_FLAGS=--smoke instead checks what it prints and stops by itself.
# The binary is built first and runs in the recipe's place (not under
# `go run`, which turns any stop into an error of its own). It is built
# with the environment and flags the demo then builds flotilla's binaries
# with (test/testworld's BuildEnv and BuildFlags), so that the packages they
# share are compiled once.
DEMO_BIN := $(HOME)/.cache/flotilla/bin/demo
DEMO_FLAGS ?=
demo:
	@bash hack/prereqs.sh
	@CGO_ENABLED=0 go build -trimpath -o $(DEMO_BIN) ./hack/demo
	@exec $(DEMO_BIN) $(DEMO_FLAGS)

# Unit and end-to-end tests against real clusters.
test:
	bash hack/test.sh

# Benchmarks flotilla against a single cluster and a direct member create
# (results in BENCHMARKS.md). Pass flags with BENCH_FLAGS, e.g.
# make bench BENCH_FLAGS="--pin --out pinned.json"; --help lists them.
.PHONY: bench
bench:
	go run ./hack/bench $(BENCH_FLAGS)

# Regenerates deepcopy functions and CRDs from the API types' markers with a
# pinned controller-gen (cached in ~/.cache/flotilla/tools); make test fails
# when they are stale.
.PHONY: generate
generate:
	bash hack/update-codegen.sh
