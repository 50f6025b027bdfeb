#!/usr/bin/env bash
# Runs every check and test: gofmt, go vet, an untidy go.mod, stale generated code, unit tests
# and the end-to-end tests against real clusters. Builds the test world's
# binaries first, so that their (cached) build is not counted against any
# test's timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

# The test world's packages and binaries, shared with make demo, and Kueue,
# which only test/kueue runs.
FLOTILLA_KUEUE=1 bash hack/prereqs.sh

unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed on:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# internal/ is plumbing: neither it nor its tests import a top-level flotilla package.
module="$(go list -m)"
upward="$(go list -f '{{$p := .ImportPath}}{{range .Imports}}{{println $p .}}{{end}}{{range .TestImports}}{{println $p .}}{{end}}{{range .XTestImports}}{{println $p .}}{{end}}' ./internal/... |
  awk -v m="$module/" 'index($2, m) == 1 && index($2, m "internal/") != 1 { print "  " $1 " imports " $2 }' | sort -u)"
if [[ -n "$upward" ]]; then
  echo "internal/ must not import a top-level flotilla package:" >&2
  echo "$upward" >&2
  exit 1
fi
# go.mod and go.sum require what the code imports, no more.
if ! go mod tidy -diff >/dev/null 2>&1; then
  echo "go.mod or go.sum is not tidy; run go mod tidy:" >&2
  go mod tidy -diff >&2 || true
  exit 1
fi
# Deepcopy functions and CRDs must be what the API types' markers generate.
bash hack/verify-codegen.sh
bash hack/verify-charts.sh # generated chart files, helm lint and template; builds helm for the e2e tests
# The in-process tests of what the binaries link, under the race detector:
# controllers share informer caches with virtual-kubelet, and a write into
# a cached object shows up nowhere else. No package outside test/ needs a
# test world, so these run once, here.
if skipped="$(git grep -l 'testing.Short()' -- '*_test.go' ':!test/')"; then
  echo "tests outside test/ run only with -short, so none may skip in short mode:" >&2
  echo "$skipped" >&2
  exit 1
fi
go test -race -short -count=1 $(go list ./... | grep -v -e '/test/' -e '/hack/')
# The tests against real clusters, one package at a time: the test world of
# test/testworld and the e2e world would otherwise run side by side on two
# cores and, together, come close to the default limit of 128 inotify
# instances per user. hack/ (the bench and the demo, which no binary links)
# runs here too, without the race detector's slower build.
go test -p 1 -count=1 -timeout 45m ./test/... ./hack/...
