package shepherdtest_test

import (
	"fmt"
	"testing"
)

// exampleT stands in, in the examples, for the *testing.T of a test: a
// testing.TB whose cleanups run at finish and whose failures panic.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func newT() *exampleT { return &exampleT{} }

func (t *exampleT) Helper()                      {}
func (t *exampleT) Name() string                 { return "Example" }
func (t *exampleT) Cleanup(f func())             { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Log(args ...any)              {}
func (t *exampleT) Logf(string, ...any)          {}
func (t *exampleT) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (t *exampleT) Error(args ...any)            { panic(fmt.Sprint(args...)) }
func (t *exampleT) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (t *exampleT) Errorf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// finish runs the cleanups, last registered first, as a test's end does.
func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
