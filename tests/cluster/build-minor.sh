#!/usr/bin/env bash
# Builds the test cluster's control plane for another Kubernetes release than the default (go.mod):
#   build-minor.sh v1.33.13 [--dir-only]
# The Go module is generated, not checked in: k8s.io/kubernetes at that version, each staging module
# pinned with `replace` to the matching v0.<minor>.<patch> (read from that release's own go.mod),
# then `go mod tidy`. kcp/main.go, pause/, fakesmi/ and etcd/ are the same sources as the default build.
# Cache entry: ${AICR_CLUSTER_BIN_CACHE:-~/.cache/aicr/testcluster}/.k8s-<version>-<hash>/ (bin/ and mod/).
# The leading dot keeps it out of build.sh's pruning (`"$cache_root"/*/` does not match dot folders),
# in this checkout and in every older one; only an older entry of the same version is removed here.
# Its own lock (.lock.k8s-<version>): a long build of another release never blocks the default build.
# --dir-only prints the entry's folder without building. Prints the bin folder as its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[ -x "$GO" ] || GO=/usr/local/go/bin/go
version="${1:-}"
if ! [[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "build-minor.sh: expected a Kubernetes release like v1.33.13, got '${version}'" >&2
  exit 2
fi
minor="${BASH_REMATCH[1]}"
staging="v0.${minor}.${BASH_REMATCH[2]}"
cache_root="${AICR_CLUSTER_BIN_CACHE:-${HOME:-/root}/.cache/aicr/testcluster}"
hash="$(cd "$here" && { echo "$version"; cat build-minor.sh kcp/*.go pause/*.go fakesmi/*.go etcd/go.mod etcd/go.sum etcd/*.go; } | sha256sum | cut -c1-16)"
entry="$cache_root/.k8s-$version-$hash"
bin="$entry/bin"
if [ "${2:-}" = "--dir-only" ]; then
  echo "$entry"
  exit 0
fi

cached() {
  if [ -x "$bin/kcp" ] && [ -x "$bin/etcd" ] && [ -x "$bin/pause" ] && [ -x "$bin/nvidia-smi" ]; then
    echo "build-minor: cached binaries for $version in $bin" >&2
    echo "$bin"
    exit 0
  fi
}
cached
mkdir -p "$cache_root"
exec 9>"$cache_root/.lock.k8s-$version"
if ! flock -n 9; then
  echo "build-minor: waiting for another build of $version" >&2
  flock 9
fi
cached

mod="$entry/mod"
rm -rf "$bin.tmp" "$mod" && mkdir -p "$bin.tmp" "$mod/kcp"
cp "$here/kcp/"*.go "$mod/kcp/"
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# The release's own go.mod lists its staging modules as `k8s.io/x => ./staging/src/k8s.io/x`.
info="$(cd "$mod" && "$GO" mod download -json "k8s.io/kubernetes@$version")"
k8s_gomod="$(echo "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
k8s_dir="$(echo "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[ -f "$k8s_gomod" ] || { echo "build-minor: no go.mod for k8s.io/kubernetes@$version" >&2; exit 1; }
# A release whose kubelet command takes no context (1.33 and 1.30 do not): the generated copy of
# kcp/main.go calls it without one.
if grep -q '^func NewKubeletCommand() ' "$k8s_dir/cmd/kubelet/app/server.go"; then
  sed -i -e 's/kubelet\.NewKubeletCommand(context\.Background())/kubelet.NewKubeletCommand()/' \
    -e '/^\t"context"$/d' "$mod/kcp/main.go"
fi
(
  cd "$mod"
  "$GO" mod init aicr.local/testcluster-k8s >/dev/null 2>&1
  args=()
  while read -r m; do args+=("-replace=$m=$m@$staging"); done < <(
    awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "$k8s_gomod"
  )
  "$GO" mod edit "${args[@]}" -require="k8s.io/kubernetes@$version"
  "$GO" mod tidy >&2
)
export CGO_ENABLED=0 GOFLAGS="$GOFLAGS -trimpath -mod=readonly"
step() {
  local dir="$1" pkg="$2" out="$3" label="$4" ldflags="${5:-}" start
  start=$(date +%s)
  echo "build-minor: $label: $(cd "$dir" && "$GO" list -deps "$pkg" | wc -l) packages" >&2
  (cd "$dir" && "$GO" build -ldflags="-s -w $ldflags" -o "$out" "$pkg") >&2
  echo "build-minor: $label done in $(($(date +%s) - start))s" >&2
}
step "$here/etcd" . "$bin.tmp/etcd" etcd
ldflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  ldflags="$ldflags -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=1970-01-01T00:00:00Z"
done
step "$mod" ./kcp "$bin.tmp/kcp" "kcp $version" "$ldflags"
step "$here" ./pause "$bin.tmp/pause" pause
step "$here" ./fakesmi "$bin.tmp/nvidia-smi" "fake nvidia-smi"
rm -rf "$bin" && mv "$bin.tmp" "$bin"
# Older entries of this same release (other source hashes) only.
for old in "$cache_root"/.k8s-"$version"-*/; do
  [ "${old%/}" = "$entry" ] || rm -rf "$old"
done
echo "$bin"
