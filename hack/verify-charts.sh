#!/usr/bin/env bash
# Checks the charts: that what hack/update-charts.sh generates (the RBAC
# copies, the README) is current and every value is documented, and that
# `helm lint --strict` and `helm template` pass for each of the chart's
# ci/*-values.yaml files. Also checks that the chart refuses to render
# without member credentials. Builds helm and helm-docs first (cached).
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

# helm-docs lists a value without a `# --` comment with an empty description.
if grep -nE '^\|[^|]+\|[^|]+\|[^|]+\|[[:space:]]*\|$' charts/flotilla-node/README.md >&2; then
  fail "values without a '# --' comment in charts/flotilla-node/values.yaml"
fi

chart=charts/flotilla-node
for values in "$chart"/ci/*-values.yaml; do
  "$helm" lint --strict --quiet "$chart" -f "$values" >&2 || fail "helm lint $chart -f $values"
  "$helm" template beijing "$chart" --namespace flotilla-system -f "$values" >"$tmp/rendered.yaml" ||
    fail "helm template $chart -f $values"
done

if out="$("$helm" template beijing "$chart" 2>&1)"; then
  fail "$chart rendered without member credentials"
fi
grep -q "kubeconfig is required" <<<"$out" || fail "$chart without member credentials: unexpected error: $out"
echo "verify-charts: ok" >&2
