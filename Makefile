# The two entry points; see README.md.
.PHONY: demo test

# Starts a host and three member clusters with flotilla and a sample
# Deployment spread across them; runs until Ctrl-C.
demo:
	go run ./hack/demo

# Unit and end-to-end tests against real clusters (builds the test world's
# binaries into ~/.cache/flotilla on first use).
test:
	bash hack/test.sh

# Benchmarks flotilla against a single cluster and a direct member create
# (issue 7; results in BENCHMARKS.md). Pass flags with BENCH_FLAGS, e.g.
# make bench BENCH_FLAGS="--pin --out pinned.json".
.PHONY: bench
bench:
	go run ./hack/bench $(BENCH_FLAGS)

# Regenerates deepcopy functions and CRDs from the API types' markers with a
# pinned controller-gen (cached in ~/.cache/flotilla/tools); make test fails
# when they are stale.
.PHONY: generate
generate:
	bash hack/update-codegen.sh
