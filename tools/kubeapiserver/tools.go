//go:build tools

// Package kubeapiserver pins the kube-apiserver that internal/kube's tests
// run against. It is a separate module so that k8s.io/kubernetes and its
// staging replaces never enter the project's own go.mod; build.sh builds
// the binary into a cache directory.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
