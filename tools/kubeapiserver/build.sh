#!/usr/bin/env bash
# Builds kube-apiserver (the version pinned in this module's go.mod) into the
# cache directory internal/kube/kubetest looks in, and prints its path. A
# binary already there is reused: the build takes ~10 minutes of CPU.
set -euo pipefail
cd "$(dirname "$0")"
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' go.mod)
dir="${JOBFABRIC_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobfabric}/kube-apiserver-$version"
bin="$dir/kube-apiserver"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  GOWORK=off GOFLAGS=-mod=mod go build -trimpath -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
