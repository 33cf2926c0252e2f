package queue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
)

// maxStackSize bounds a panic's stack as stored (AttemptError.Stack).
const maxStackSize = 4096

// call runs the handler, turning a panic into a *panicError.
func call(ctx context.Context, sl slot, t *Task) (res []byte, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, newPanicError(p, debug.Stack()), true
		}
	}()
	res, err = sl.handle(ctx, t)
	return res, err, false
}

// panicError is a handler's panic: its message is one line, "panic:
// VALUE", so that the attempt's error (and a log line that carries it)
// stays one line; the stack is kept apart, in AttemptError.Stack.
type panicError struct {
	value string // the panic's value, its line breaks escaped
	stack string // from the panicking frame, at most maxStackSize bytes
}

func (e *panicError) Error() string { return "panic: " + e.value }

var oneLine = strings.NewReplacer("\r", `\r`, "\n", `\n`)

func newPanicError(p any, stack []byte) *panicError {
	return &panicError{value: oneLine.Replace(fmt.Sprint(p)), stack: panicStack(string(stack))}
}

// stackOf returns the stack of a handler's panic, "" for any other error.
func stackOf(err error) string {
	var pe *panicError
	if errors.As(err, &pe) {
		return pe.stack
	}
	return ""
}

// callFrame is how call's frame starts in a stack.
var callFrame = reflect.TypeFor[panicError]().PkgPath() + ".call("

// panicStack trims a goroutine's stack taken by the recovering deferred
// call (debug.Stack): it keeps the goroutine's header line, drops the
// frames of the recovery and of the runtime's panic (debug.Stack, the
// deferred call, panic, and runtime frames such as runtime.goPanicIndex
// or runtime.sigpanic) so that the panicking frame comes first, drops the
// worker's frames from call down (the same for every panic), and cuts it
// at a line break to at most maxStackSize bytes.
func panicStack(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := 1; i+1 < len(lines); i += 2 { // a frame is two lines: the call, then its file
		if !strings.HasPrefix(lines[i], "panic(") {
			continue
		}
		j := i + 2
		for j+1 < len(lines) && strings.HasPrefix(lines[j], "runtime.") {
			j += 2
		}
		lines = append(lines[:1], lines[j:]...)
		break
	}
	for i := 1; i < len(lines); i += 2 {
		if strings.HasPrefix(lines[i], callFrame) {
			lines = lines[:i]
			break
		}
	}
	out := strings.Join(lines, "\n")
	if len(out) <= maxStackSize {
		return out
	}
	const cut = "\n… (truncated)"
	out = out[:maxStackSize-len(cut)]
	if nl := strings.LastIndexByte(out, '\n'); nl > 0 {
		out = out[:nl]
	}
	return out + cut
}
