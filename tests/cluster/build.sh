#!/usr/bin/env bash
# Builds the test cluster's real control plane from Go modules, once per source hash:
#   kcp   multi-call binary: kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes)
#   etcd  go.etcd.io/etcd/server/v3 (3.6 line), its own module
#   (kcp also holds `kcp kubelet`, the real kubelet of the real-kubelet lane, tests/realnode/)
#   pause, nvidia-smi  the lane's sandbox image entrypoint and its GPU node's injected fake nvidia-smi
# Binaries go to ${AICR_CLUSTER_BIN_CACHE:-$HOME/.cache/aicr/testcluster}/<hash>/ (outside the repo, so a
# fresh clone on the same machine reuses them). tests/cluster/.bin is a git-ignored symlink to that folder.
# Prints the bin dir as its last line. Idempotent: does nothing when the cached binaries exist.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[ -x "$GO" ] || GO=/usr/local/go/bin/go
cache_root="${AICR_CLUSTER_BIN_CACHE:-${HOME:-/root}/.cache/aicr/testcluster}"
hash="$(cd "$here" && cat build.sh go.mod go.sum kcp/*.go pause/*.go fakesmi/*.go etcd/go.mod etcd/go.sum etcd/*.go | sha256sum | cut -c1-16)"
bin="$cache_root/$hash"

link() { ln -sfn "$bin" "$here/.bin"; echo "$bin"; }

cached() {
  if [ -x "$bin/kcp" ] && [ -x "$bin/etcd" ] && [ -x "$bin/pause" ] && [ -x "$bin/nvidia-smi" ]; then
    echo "cluster:build: cached binaries in $bin" >&2
    link
    exit 0
  fi
}
cached
# One build at a time (two test runs starting together on a cold cache): wait, then look again.
# The holder writes who it is beside the lock; a waiter prints that and a heartbeat every 30 s, so a
# build that seems stuck says it is waiting for another checkout's build, and which one.
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
  holder="$(cat "$cache_root/.lock.holder" 2>/dev/null || echo "unknown holder")"
  echo "cluster:build: waiting for another build of the control plane: $holder" >&2
  waited=0
  until flock -w 30 9; do
    waited=$((waited + 30))
    holder="$(cat "$cache_root/.lock.holder" 2>/dev/null || echo "unknown holder")"
    echo "cluster:build: still waiting after ${waited}s for: $holder" >&2
  done
  echo "cluster:build: the other build finished after about ${waited}s of waiting" >&2
fi
echo "pid $$ in $here since $(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$cache_root/.lock.holder"
trap 'rm -f "$cache_root/.lock.holder"' EXIT
cached

rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly -buildvcs=false"
# build_one <module dir> <package> <output> <label>: go build -v, printing [n/total] as packages compile
# (packages already in Go's build cache are not printed, so n may stop short of total).
build_one() {
  local dir="$1" pkg="$2" out="$3" label="$4" total start
  start=$(date +%s)
  total="$(cd "$dir" && "$GO" list -deps "$pkg" | wc -l)"
  echo "cluster:build: $label: $total packages (cold build of k8s on 2 cores takes a while)" >&2
  (cd "$dir" && "$GO" build -v -ldflags="-s -w $ldflags" -o "$out" "$pkg" 2>&1) | awk -v total="$total" -v label="$label" '
    /^(#|[a-z]+\.go:|.*: )/ && !/^[a-zA-Z0-9._\/-]+$/ { print; fflush(); next }
    { n++; if (n % 25 == 0 || n == 1) { printf("cluster:build: %s [%d/%d] %s\n", label, n, total, $0); fflush() } }
  ' >&2
  [ -x "$out" ] || { echo "cluster:build: $label failed" >&2; exit 1; }
  echo "cluster:build: $label done in $(( $(date +%s) - start ))s" >&2
}
ldflags=""
build_one "$here/etcd" . "$bin.tmp/etcd" etcd
# Stamp the release version as Kubernetes' own build does (hack/lib/version.sh), so /version and
# kubectl report v1.x.y instead of v0.0.0-master.
k8s="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' "$here/go.mod")"
minor="$(echo "$k8s" | cut -d. -f2)"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $p.gitVersion=$k8s -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ldflags="$ldflags -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done
build_one "$here" ./kcp "$bin.tmp/kcp" "kcp $k8s"
ldflags=""
build_one "$here" ./pause "$bin.tmp/pause" pause
build_one "$here" ./fakesmi "$bin.tmp/nvidia-smi" "fake nvidia-smi"
rm -rf "$bin" && mv "$bin.tmp" "$bin"
# Keep the three newest builds (~160 MB each); older ones belong to sources no longer checked out.
ls -1dt "$cache_root"/*/ 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
link
