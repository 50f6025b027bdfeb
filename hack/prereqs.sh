#!/usr/bin/env bash
# Prepares this machine for `make demo` and `make test`: installs what the
# test world runs its clusters with (ip and nft from iproute2 and nftables,
# unshare and nsenter from util-linux) when they are missing, then builds
# the test world's binaries into ~/.cache/flotilla (hack/build-testworld.sh).
# Safe to run again: it installs and builds only what is not there yet.
set -euo pipefail
cd "$(dirname "$0")/.."

have() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" || -x "/sbin/$1" ]]; }

missing=()
# ip sets up the clusters' private network namespaces; nft the firewall of
# a site whose member is behind NAT and only dials out.
have ip || missing+=(iproute2)
have nft || missing+=(nftables)
# unshare starts the world in its network namespace; nsenter lets kubectl
# from another shell in.
{ have unshare && have nsenter; } || missing+=(util-linux)
if ((${#missing[@]})); then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "prereqs: missing ${missing[*]}; install them with your package manager" >&2
    exit 1
  fi
  echo "prereqs: installing ${missing[*]} for the test world's network namespaces" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi

bash hack/build-testworld.sh --all-versions >/dev/null
