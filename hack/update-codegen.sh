#!/usr/bin/env bash
# Regenerates everything derived from the API types' markers: deepcopy
# functions for apis/*/v1alpha1. controller-gen is built from the Go module
# proxy at a pinned version into a cache keyed by version, and reused from
# there. hack/verify-codegen.sh runs this script on a copy of
# the tree and fails when the result differs from what is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

# v0.20.x is the controller-tools line built against k8s.io/* v0.35, the
# version flotilla uses; v0.21 moved to v0.36.
CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.20.1}"
CACHE="${FLOTILLA_CACHE:-${HOME}/.cache/flotilla}/tools"

log() { echo "update-codegen: $*" >&2; }

# controller_gen prints the path of the cached controller-gen binary, building
# it first when it is not there yet.
controller_gen() {
  local out="$CACHE/controller-gen-$CONTROLLER_TOOLS_VERSION"
  if [[ ! -x "$out/bin/controller-gen" ]]; then
    log "building controller-gen $CONTROLLER_TOOLS_VERSION"
    # A directory of its own, so that concurrent runs never see half a binary.
    local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
    # path@version builds with the tool's own go.mod, whatever flotilla's says.
    GOBIN="$tmp" go install -trimpath -ldflags "-s -w" \
      "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION" >&2
    rm -rf "$out/bin" && mv "$tmp" "$out/bin"
  fi
  echo "$out/bin/controller-gen"
}

gen="$(controller_gen)"

"$gen" object paths=./apis/...

