#!/usr/bin/env bash
# Builds the tools the repository's scripts and tests use on its charts and
# API types — helm, helm-docs and controller-gen — from the Go module proxy at
# pinned versions into a cache keyed by version, and skips whatever is
# already there. Prints the bin directory of each on stdout as NAME=DIR lines
# (HELM_BIN, HELM_DOCS_BIN, CONTROLLER_GEN_BIN), so that scripts can
# `eval "$(bash hack/build-tools.sh)"`. With tool names as arguments, builds
# and prints only those.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v4.3.1}"
HELM_DOCS_VERSION="${HELM_DOCS_VERSION:-v1.14.2}"
# v0.23.x is the controller-tools line built against k8s.io/* v0.37, the
# version flotilla uses.
CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.23.0}"
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

TOOLS=("$@")
# wanted NAME: whether the caller asked for NAME (everything, when nothing).
wanted() { [[ ${#TOOLS[@]} -eq 0 || " ${TOOLS[*]} " == *" $1 "* ]]; }

# helm reports the version it was built with only when told (its Makefile
# does the same from the release tag).
if wanted helm; then
  install_tool helm "$HELM_VERSION" helm.sh/helm/v4/cmd/helm \
    "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  echo "HELM_BIN=$CACHE/helm-$HELM_VERSION/bin"
fi

if wanted helm-docs; then
  install_tool helm-docs "$HELM_DOCS_VERSION" github.com/norwoodj/helm-docs/cmd/helm-docs \
    "-X main.version=${HELM_DOCS_VERSION#v}"
  echo "HELM_DOCS_BIN=$CACHE/helm-docs-$HELM_DOCS_VERSION/bin"
fi

# controller-gen takes its version from the module it was installed from.
if wanted controller-gen; then
  install_tool controller-gen "$CONTROLLER_TOOLS_VERSION" sigs.k8s.io/controller-tools/cmd/controller-gen
  echo "CONTROLLER_GEN_BIN=$CACHE/controller-gen-$CONTROLLER_TOOLS_VERSION/bin"
fi
