#!/usr/bin/env bash
# Builds the tools the repository's scripts and tests use on its charts —
# helm and helm-docs — from the Go module proxy at pinned versions into a
# cache keyed by version, and skips whatever is already there. Prints the bin
# directory of each on stdout as NAME=DIR lines (HELM_BIN, HELM_DOCS_BIN), so
# that scripts can `eval "$(bash hack/build-tools.sh)"`.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
HELM_DOCS_VERSION="${HELM_DOCS_VERSION:-v1.14.2}"
CACHE="${FLOTILLA_CACHE:-${HOME}/.cache/flotilla}/tools"

log() { echo "build-tools: $*" >&2; }

# install_tool NAME VERSION PACKAGE [LDFLAGS] installs PACKAGE@VERSION as
# $CACHE/NAME-VERSION/bin/NAME. It builds into a directory of its own and
# moves it into place, because test binaries may run this script concurrently.
install_tool() {
  local name="$1" version="$2" pkg="$3" ldflags="${4:-}"
  local out="$CACHE/$name-$version"
  if [[ -x "$out/bin/$name" ]]; then return; fi
  log "building $name $version"
  local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
  GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w $ldflags" "$pkg@$version" >&2
  rm -rf "$out/bin" && mv "$tmp" "$out/bin"
}

# helm reports the version it was built with only when told (its Makefile
# does the same from the release tag).
install_tool helm "$HELM_VERSION" helm.sh/helm/v4/cmd/helm \
  "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
echo "HELM_BIN=$CACHE/helm-$HELM_VERSION/bin"

install_tool helm-docs "$HELM_DOCS_VERSION" github.com/norwoodj/helm-docs/cmd/helm-docs \
  "-X main.version=${HELM_DOCS_VERSION#v}"
echo "HELM_DOCS_BIN=$CACHE/helm-docs-$HELM_DOCS_VERSION/bin"
