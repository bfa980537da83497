// Package integration holds flotilla's scenario tests: each starts a real
// kube-apiserver and flotilla-scheduler in-process through the harness and
// asserts what a user would see through the API.
package integration
