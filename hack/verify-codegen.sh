#!/usr/bin/env bash
# Fails, showing the difference, when the generated files (deepcopy
# functions, CRDs and the charts' copies of the CRDs, flotilla-policy's roles)
# are not what hack/update-codegen.sh produces from the current API types
# and markers. It regenerates
# into a temporary copy of the tree, so the working tree is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

GENERATED=(apis config/crd charts/flotilla-policy/crds charts/flotilla-node/crds config/rbac/policy-clusterrole.yaml config/rbac/policy-role.yaml)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The tree as it would be committed now: tracked and untracked files, minus
# ignored ones (build output).
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -e "$f" ]] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$work"

(cd "$work" && bash hack/update-codegen.sh)

status=0
for d in "${GENERATED[@]}"; do
  if [[ -d "$d" ]]; then
    diff -ruN "$d" "$work/$d" || status=1
  else
    diff -u "$d" "$work/$d" || status=1
  fi
done
if [[ $status != 0 ]]; then
  echo >&2
  echo "verify-codegen: generated files are stale (diff above: committed -> regenerated); run hack/update-codegen.sh and commit the result" >&2
  exit 1
fi
echo "verify-codegen: generated files are up to date" >&2
