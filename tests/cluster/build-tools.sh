#!/usr/bin/env bash
# Builds the client tools the chart and manifest tests drive, from Go modules, once per source hash:
#   helm     helm.sh/helm/v4/cmd/helm (a `tool` of tools/go.mod)
#   kubectl  k8s.io/kubectl at the control plane's release (tools/kubectl/main.go): `kubectl
#            kustomize`, `kubectl apply -f`
#   prometheus  github.com/prometheus/prometheus/cmd/prometheus (its own module, prometheus/), with
#            only the Kubernetes service discovery (tags remove_all_sd,enable_kubernetes_sd):
#            Debian's package is built without it, and the real-kubelet lane discovers the daemons
#            through the API server
# Both share one module (helm v4 brings the same k8s.io release as the control plane), so the second
# link reuses the first's compiled packages. Binaries go to
# ${AICR_TOOLS_BIN_CACHE:-$HOME/.cache/aicr/tools}/<hash>/ (outside the repo: a fresh clone on the same
# machine reuses them); tests/cluster/.tools is a git-ignored symlink to that folder. Prints the bin
# dir as its last line. Idempotent: does nothing when the cached binaries exist. One build at a time
# (a lock beside the cache, as build.sh's).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[ -x "$GO" ] || GO=/usr/local/go/bin/go
cache_root="${AICR_TOOLS_BIN_CACHE:-${HOME:-/root}/.cache/aicr/tools}"
hash="$(cd "$here" && cat build-tools.sh tools/go.mod tools/go.sum tools/kubectl/*.go prometheus/go.mod prometheus/go.sum | sha256sum | cut -c1-16)"
bin="$cache_root/$hash"

link() { ln -sfn "$bin" "$here/.tools"; echo "$bin"; }

cached() {
  if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/prometheus" ]; then
    echo "tools:build: cached helm, kubectl and prometheus in $bin" >&2
    link
    exit 0
  fi
}
cached
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  holder="$(cat "$cache_root/.lock.holder" 2>/dev/null || echo "unknown holder")"
  echo "tools:build: waiting for another build of helm and kubectl: $holder" >&2
  waited=0
  until flock -w 30 9; do
    waited=$((waited + 30))
    holder="$(cat "$cache_root/.lock.holder" 2>/dev/null || echo "unknown holder")"
    echo "tools:build: still waiting after ${waited}s for: $holder" >&2
  done
fi
echo "pid $$ in $here since $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$cache_root/.lock.holder"
trap 'rm -f "$cache_root/.lock.holder"' EXIT
cached

rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"
# build_one <package> <output> <label> [ldflags] [module dir] [tags]: go build -v, printing [n/total]
# as packages compile.
build_one() {
  local pkg="$1" out="$2" label="$3" extra="${4:-}" dir="${5:-$here/tools}" tags="${6:-}" total start
  start=$(date +%s)
  total="$(cd "$dir" && "$GO" list -tags "$tags" -deps "$pkg" | wc -l)"
  echo "tools:build: $label: $total packages" >&2
  (cd "$dir" && "$GO" build -v -tags "$tags" -ldflags="-s -w $extra" -o "$out" "$pkg" 2>&1) | awk -v total="$total" -v label="$label" '
    /^(#|[a-z]+\.go:|.*: )/ && !/^[a-zA-Z0-9._\/-]+$/ { print; fflush(); next }
    { n++; if (n % 25 == 0 || n == 1) { printf("tools:build: %s [%d/%d] %s\n", label, n, total, $0); fflush() } }
  ' >&2
  [ -x "$out" ] || { echo "tools:build: $label failed" >&2; exit 1; }
  echo "tools:build: $label done in $(( $(date +%s) - start ))s" >&2
}
version() { awk -v m="$1" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$here/tools/go.mod"; }
helm_version="$(cd "$here/tools" && "$GO" list -m -f '{{.Version}}' helm.sh/helm/v4)"
build_one helm.sh/helm/v4/cmd/helm "$bin.tmp/helm" "helm $helm_version" \
  "-X helm.sh/helm/v4/internal/version.version=$helm_version"
kubectl_version="v1.$(version k8s.io/kubectl | cut -d. -f2-)"
kv=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kv="$kv -X $p.gitVersion=$kubectl_version -X $p.gitMajor=1 -X $p.gitMinor=$(echo "$kubectl_version" | cut -d. -f2) -X $p.gitTreeState=clean"
done
build_one ./kubectl "$bin.tmp/kubectl" "kubectl $kubectl_version" "$kv"
prom_version="$(cd "$here/prometheus" && "$GO" list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
build_one github.com/prometheus/prometheus/cmd/prometheus "$bin.tmp/prometheus" \
  "prometheus $prom_version" "" "$here/prometheus" remove_all_sd,enable_kubernetes_sd
rm -rf "$bin" && mv "$bin.tmp" "$bin"
# Keep the two newest builds; older ones belong to sources no longer checked out.
ls -1dt "$cache_root"/*/ 2>/dev/null | tail -n +3 | while read -r old; do rm -rf "$old"; done
link
