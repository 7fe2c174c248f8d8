// Package fakemod is the tree the mutation check's own tests mutate: each
// guard returns true, each of its mutations (mutants.txt) makes it return
// false, and its test behaves as a test of gendex might under a mutation.
package fakemod

// Kept: its test fails at once when it is mutated.
func Kept() bool { return true }

// Hangs: its test sleeps past any timeout when it is mutated.
func Hangs() bool { return true }

// SlowOnce: its test sleeps past the timeout the first time it runs
// mutated (as on a loaded machine), then passes: the mutation survived.
func SlowOnce() bool { return true }

// SlowOnceThenFails: its test sleeps past the timeout the first time it
// runs mutated, then fails: the mutation is caught.
func SlowOnceThenFails() bool { return true }
