#!/usr/bin/env bash
# Checks the charts: that what hack/update-charts.sh generates (the RBAC
# copies, the READMEs) is current and every value is documented, that
# `helm lint --strict` and `helm template` pass for each chart's
# ci/*-values.yaml files, that flotilla-node refuses to render without
# member (push) or host (pull) credentials or with inconsistent values, and that flotilla-policy
# renders the names its roles grant. Builds helm and helm-docs
# first (cached).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash hack/build-tools.sh)"
helm="$HELM_BIN/helm"

fail() { echo "verify-charts: $*" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# helm's own configuration and caches stay out of the user's home.
export HELM_CACHE_HOME="$tmp/helm/cache" HELM_CONFIG_HOME="$tmp/helm/config" HELM_DATA_HOME="$tmp/helm/data"

cp -a charts "$tmp/charts"
CHARTS_DIR="$tmp/charts" bash hack/update-charts.sh
diff -ru charts "$tmp/charts" >&2 || fail "generated chart files are stale; run hack/update-charts.sh"

for chart in charts/flotilla-node charts/flotilla-policy; do
  # helm-docs lists a value without a `# --` comment with an empty description.
  if grep -nE '^\|[^|]+\|[^|]+\|[^|]+\|[[:space:]]*\|$' "$chart/README.md" >&2; then
    fail "values without a '# --' comment in $chart/values.yaml"
  fi
  for values in "$chart"/ci/*-values.yaml; do
    "$helm" lint --strict --quiet "$chart" -f "$values" >&2 || fail "helm lint $chart -f $values"
    "$helm" template beijing "$chart" --namespace flotilla-system -f "$values" >"$tmp/rendered.yaml" ||
      fail "helm template $chart -f $values"
  done
done

# flotilla-policy: the names its roles grant are the ones it renders.
chart=charts/flotilla-policy
out="$("$helm" template p "$chart" --namespace flotilla-system)"
for want in "name: flotilla-policy$" "--webhook-cert-secret=flotilla-system/flotilla-policy-webhook-cert$" \
  "--mutating-webhook-configuration=flotilla-policy$" "values: \[\"flotilla-system\", kube-system\]$"; do
  grep -qE -- "$want" <<<"$out" || fail "$chart renders no line matching '$want'"
done

chart=charts/flotilla-node

# refuse WANT ARGS...: the chart must not render with ARGS, saying WANT.
refuse() {
  local want="$1" out
  shift
  if out="$("$helm" template beijing "$chart" "$@" 2>&1)"; then
    fail "$chart rendered with: $*"
  fi
  grep -qF -- "$want" <<<"$out" || fail "$chart with $*: want an error saying '$want', got: $out"
}
refuse "kubeconfig is required"
refuse "not both" --set member.kubeconfig=x --set member.existingSecret=s
refuse "must be a DNS subdomain" --set member.existingSecret=s --set cluster.name=Beijing_1
refuse "set these per virtual cluster" -f "$chart/ci/partitions-values.yaml" --set node.region=east
refuse "virtualClusters[0].name is required" --set member.existingSecret=s --set-json 'virtualClusters=[{"region":"east"}]'
refuse "want push (installed in the host), pull" --set member.existingSecret=s --set mode=pulll
refuse "pull mode needs the host cluster's kubeconfig" --set mode=pull
refuse "not the member's kube-root-ca.crt" --set mode=pull --set host.existingSecret=h
refuse "konnectivityAgent.proxyServerHost is required" --set mode=pull --set host.existingSecret=h --set kubelet.clientCA.configMap=host-ca
refuse "konnectivityAgent.tlsSecret is required" --set mode=pull --set host.existingSecret=h --set kubelet.clientCA.configMap=host-ca \
  --set konnectivityAgent.proxyServerHost=k
echo "verify-charts: ok" >&2
