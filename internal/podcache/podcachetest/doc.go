// Package podcachetest builds the pods the tests of the pod caches and of
// their readers share: pods as an apiserver serves them, and what the
// caches' transforms make of them.
package podcachetest
