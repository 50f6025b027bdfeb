#!/usr/bin/env bash
# Builds the test world's binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok, metrics-server, the
# apiserver-network-proxy's proxy-server and proxy-agent, and Kueue's
# controller manager) from the Go module proxy at pinned versions into a cache
# keyed by version, and skips whatever is already there. Prints the bin
# directory of each component on stdout as NAME=DIR lines, the Kubernetes
# version as KUBERNETES_VERSION=V, kwok's stage directory as KWOK_STAGES=DIR
# and Kueue's module directory (whose CRDs a world applies) as
# KUEUE_MODULE=DIR. kube-proxy of KUBERNETES_VERSION, which only the
# data-plane tests run, is built when FLOTILLA_KUBE_PROXY=1 or already there
# (KUBE_PROXY_BIN=DIR).
#
# Usage: build-testworld.sh [--all-versions]
#   KUBERNETES_VERSION picks the Kubernetes version (default: the newest of
#   KUBERNETES_VERSIONS); --all-versions builds every version of
#   KUBERNETES_VERSIONS too, as the mixed-version test worlds run them all.
set -euo pipefail

# One release per supported minor, newest first (test/testworld names the
# same ones).
KUBERNETES_VERSIONS="${KUBERNETES_VERSIONS:-v1.37.2 v1.36.3 v1.35.4 v1.34.4}"
KUBERNETES_VERSION="${KUBERNETES_VERSION:-${KUBERNETES_VERSIONS%% *}}"
# The etcd minor Kubernetes 1.37 is built against; 1.34 to 1.36 run on it
# as well.
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
METRICS_SERVER_VERSION="${METRICS_SERVER_VERSION:-v0.9.0}"
# The newest apiserver-network-proxy served; Kubernetes 1.37's apiserver
# links its konnectivity-client v0.36.0.
KONNECTIVITY_VERSION="${KONNECTIVITY_VERSION:-v0.36.0}"
all_versions=0
case "${1:-}" in
  --all-versions) all_versions=1 ;;
  "") ;;
  *) echo "usage: $0 [--all-versions]" >&2; exit 2 ;;
esac
# The newest Kueue on the module proxy; it is built against Kubernetes 1.35.
# Only test/kueue runs it, so it is built only when FLOTILLA_KUEUE=1 (make
# test sets it) or when it is already there: the demo's first build does not
# wait for it.
KUEUE_VERSION="${KUEUE_VERSION:-v0.17.0}"
CACHE="${FLOTILLA_CACHE:-${HOME}/.cache/flotilla}/testworld"

log() { echo "build-testworld: $*" >&2; }

# announce says once, before the first build, what a cold cache costs, so
# that a first `make demo` or `make test` does not look hung.
announced=0
announce() {
  ((announced)) && return
  announced=1
  log "first run: building the test world's binaries into $CACHE takes about 7 minutes per Kubernetes version on 2 cores (the mixed-version worlds run ${KUBERNETES_VERSIONS// /, }), 8 more for etcd, kwok, metrics-server and Konnectivity, and for make test about 5 more for Kueue; later runs reuse them"
}

# build_kubernetes compiles the control-plane components and kubectl from a
# throwaway module that requires k8s.io/kubernetes. Its staging modules are
# replaced by their published versions, exactly as k8s.io/kubernetes' own
# go.mod replaces them with local directories.
# kubernetes_module writes DIR/go.mod of module flotilla.local/NAME, which
# builds commands of k8s.io/kubernetes VERSION: every staging module it
# replaces with a local path is required at the matching v0 version.
kubernetes_module() {
  local dir="$1" name="$2" version="$3"
  local gomod
  gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  local staging="v0${version#v1}"
  {
    echo "module flotilla.local/$name"
    echo
    echo "go 1.25"
    echo
    echo "require k8s.io/kubernetes $version"
    echo
    awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r&&$2=="=>"{print $1}' "$gomod" |
      while read -r m; do echo "replace $m => $m $staging"; done
  } >"$dir/go.mod"
}

build_kubernetes() {
  local KUBERNETES_VERSION="$1"
  local out="$CACHE/kubernetes-$KUBERNETES_VERSION"
  if [[ -x "$out/bin/kube-apiserver" && -x "$out/bin/kube-controller-manager" && -x "$out/bin/kube-scheduler" && -x "$out/bin/kubectl" ]]; then
    echo "$out/bin"; return
  fi
  announce
  log "building kubernetes $KUBERNETES_VERSION"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  kubernetes_module "$work" testworld-kubernetes "$KUBERNETES_VERSION"
  mkdir -p "$work/kube-apiserver" "$work/kube-controller-manager" "$work/kube-scheduler" "$work/kubectl"
  cat >"$work/kube-apiserver/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
  cat >"$work/kube-controller-manager/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() { os.Exit(cli.Run(app.NewControllerManagerCommand())) }
GO
  cat >"$work/kube-scheduler/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() { os.Exit(cli.Run(app.NewSchedulerCommand())) }
GO
  cat >"$work/kubectl/main.go" <<'GO'
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
GO
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  # A directory of its own: two test binaries may build the same version
  # at once, and the last to finish keeps its build.
  local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
  (cd "$work" && go mod tidy >&2 &&
    go build -trimpath -o "$tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
      ./kube-apiserver ./kube-controller-manager ./kube-scheduler ./kubectl) || { rm -rf "$tmp"; return 1; }
  rm -rf "$out/bin" && mv "$tmp" "$out/bin"
  echo "$out/bin"
}

# build_kube_proxy compiles kube-proxy of one version the way
# build_kubernetes compiles the control plane, into a directory of its own:
# only the data-plane tests run it, and adding it to the control plane's
# directory would rebuild every cached version.
build_kube_proxy() {
  local KUBERNETES_VERSION="$1"
  local out="$CACHE/kube-proxy-$KUBERNETES_VERSION"
  if [[ -x "$out/bin/kube-proxy" ]]; then echo "KUBE_PROXY_BIN=$out/bin"; return; fi
  announce
  log "building kube-proxy $KUBERNETES_VERSION"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  kubernetes_module "$work" testworld-kube-proxy "$KUBERNETES_VERSION"
  mkdir -p "$work/kube-proxy"
  cat >"$work/kube-proxy/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() { os.Exit(cli.Run(app.NewProxyCommand())) }
GO
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
  (cd "$work" && go mod tidy >&2 &&
    go build -trimpath -o "$tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
      ./kube-proxy) || { rm -rf "$tmp"; return 1; }
  rm -rf "$out/bin" && mv "$tmp" "$out/bin"
  echo "KUBE_PROXY_BIN=$out/bin"
}

build_etcd() {
  local out="$CACHE/etcd-$ETCD_VERSION"
  if [[ -x "$out/bin/etcd" ]]; then echo "ETCD_BIN=$out/bin"; return; fi
  announce
  log "building etcd $ETCD_VERSION"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  printf 'module flotilla.local/testworld-etcd\n\ngo 1.25\n' >"$work/go.mod"
  (cd "$work" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 &&
    mkdir -p "$out/bin.tmp" &&
    go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  echo "ETCD_BIN=$out/bin"
}

# KWOK_STAGES lists the configuration files kwok needs: without any stage it
# exits with "no stages found". These are the files of kwok's own "fast" stage
# set (kustomize/stage/fast), plus its simulation of the kubelet's
# /metrics/resource (a Metric) fed by per-pod usage annotations (a
# ClusterResourceUsage: kwok.x-k8s.io/usage-cpu and -memory, default 1m and
# 1Mi), which metrics-server scrapes. They are taken from the module cache so
# that none of kwok's files live in this repository.
KWOK_STAGES=(
  stage/node/fast/node-initialize.yaml
  stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  stage/pod/fast/pod-ready.yaml
  stage/pod/fast/pod-complete.yaml
  stage/pod/fast/pod-delete.yaml
  metrics/resource/metrics-resource.yaml
  metrics/usage/usage-from-annotation.yaml
)

build_kwok() {
  local out="$CACHE/kwok-$KWOK_VERSION"
  if [[ ! -x "$out/bin/kwok" ]]; then
    announce
    log "building kwok $KWOK_VERSION"
    mkdir -p "$out/bin.tmp"
    GOBIN="$out/bin.tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
    rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  fi
  local s have=1
  for s in "${KWOK_STAGES[@]}"; do [[ -f "$out/stages/${s##*/}" ]] || have=0; done
  if [[ $have == 0 ]]; then
    log "copying kwok $KWOK_VERSION stages"
    local work src; work="$(mktemp -d)"
    trap 'rm -rf "$work"' RETURN
    src="$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
    [[ -n "$src" ]] || { log "cannot find sigs.k8s.io/kwok@$KWOK_VERSION in the module cache"; return 1; }
    mkdir -p "$out/stages.tmp"
    for s in "${KWOK_STAGES[@]}"; do install -m 0644 "$src/kustomize/$s" "$out/stages.tmp/"; done
    rm -rf "$out/stages" && mv "$out/stages.tmp" "$out/stages"
  fi
  echo "KWOK_BIN=$out/bin"
  echo "KWOK_STAGES=$out/stages"
}

# metrics-server serves the metrics.k8s.io API (kubectl top) by scraping the
# kubelets' /metrics/resource: kwok's in members, flotilla's virtual nodes in
# the host.
build_metrics_server() {
  local out="$CACHE/metrics-server-$METRICS_SERVER_VERSION"
  if [[ ! -x "$out/bin/metrics-server" ]]; then
    announce
    log "building metrics-server $METRICS_SERVER_VERSION"
    # A directory of its own: test binaries run this script concurrently.
    local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
    GOBIN="$tmp" go install -trimpath \
      -ldflags "-s -w -X k8s.io/client-go/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
      "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION" >&2
    rm -rf "$out/bin" && mv "$tmp" "$out/bin"
  fi
  echo "METRICS_SERVER_BIN=$out/bin"
}

# build_konnectivity compiles the apiserver-network-proxy (Konnectivity)
# server and agent, through which the host apiserver reaches the kubelet
# endpoint of a member that only dials out (pull mode). Its go.mod replaces
# konnectivity-client with a local directory, so it is built from a module
# that requires it and replaces that with the published module of the same
# version, as for Kubernetes above.
build_konnectivity() {
  local out="$CACHE/konnectivity-$KONNECTIVITY_VERSION"
  if [[ -x "$out/bin/proxy-server" && -x "$out/bin/proxy-agent" ]]; then
    echo "KONNECTIVITY_BIN=$out/bin"; return
  fi
  announce
  log "building apiserver-network-proxy $KONNECTIVITY_VERSION"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  cat >"$work/go.mod" <<MOD
module flotilla.local/testworld-konnectivity

go 1.25

require sigs.k8s.io/apiserver-network-proxy $KONNECTIVITY_VERSION

replace sigs.k8s.io/apiserver-network-proxy/konnectivity-client => sigs.k8s.io/apiserver-network-proxy/konnectivity-client $KONNECTIVITY_VERSION
MOD
  (cd "$work" &&
    go get "sigs.k8s.io/apiserver-network-proxy/cmd/server@$KONNECTIVITY_VERSION" "sigs.k8s.io/apiserver-network-proxy/cmd/agent@$KONNECTIVITY_VERSION" >&2 &&
    mkdir -p "$out/bin.tmp" &&
    go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/proxy-server" sigs.k8s.io/apiserver-network-proxy/cmd/server &&
    go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/proxy-agent" sigs.k8s.io/apiserver-network-proxy/cmd/agent)
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  echo "KONNECTIVITY_BIN=$out/bin"
}

# build_kueue compiles Kueue's controller manager, which test/kueue runs
# beside the host apiserver. Its go.mod has no replace directives, so go
# install builds it straight from the module. The module directory is printed
# too: a world applies Kueue's CRDs from its config/components/crd/bases, so
# that none of Kueue's files live in this repository.
build_kueue() {
  local out="$CACHE/kueue-$KUEUE_VERSION"
  if [[ ! -x "$out/bin/kueue" ]]; then
    announce
    log "building kueue $KUEUE_VERSION"
    local tmp; mkdir -p "$out"; tmp="$(mktemp -d "$out/bin.XXXXXX")"
    GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2
    rm -rf "$out/bin" && mv "$tmp" "$out/bin"
  fi
  local work src; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  src="$(cd "$work" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')"
  [[ -d "$src/config/components/crd/bases" ]] || { log "cannot find sigs.k8s.io/kueue@$KUEUE_VERSION's CRDs in the module cache"; return 1; }
  echo "KUEUE_BIN=$out/bin"
  echo "KUEUE_MODULE=$src"
}

build_etcd
build_kwok
build_metrics_server
build_konnectivity
if [[ "${FLOTILLA_KUEUE:-}" == 1 || -x "$CACHE/kueue-$KUEUE_VERSION/bin/kueue" ]]; then
  build_kueue
fi
if ((all_versions)); then
  for v in $KUBERNETES_VERSIONS; do
    [[ "$v" == "$KUBERNETES_VERSION" ]] || build_kubernetes "$v" >/dev/null
  done
fi
if [[ "${FLOTILLA_KUBE_PROXY:-}" == 1 || -x "$CACHE/kube-proxy-$KUBERNETES_VERSION/bin/kube-proxy" ]]; then
  build_kube_proxy "$KUBERNETES_VERSION"
fi
kubernetes_bin="$(build_kubernetes "$KUBERNETES_VERSION")"
echo "KUBERNETES_VERSION=$KUBERNETES_VERSION"
echo "KUBERNETES_BIN=$kubernetes_bin"
