package pool

import (
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

// newScript is redis.NewScript for the scripts built on prelude: it
// leaves out the helper functions a script does not use. Redis runs a
// script's whole text on every call, and each `local function` of the
// prelude is a closure made and collected per call: the prelude alone
// cost about 4.5 µs a call, which dispatches pay once per admission and
// started call.
func newScript(src string) *redis.Script {
	return redis.NewScript(leanLua(src))
}

var (
	luaFuncStart = regexp.MustCompile(`(?m)^local function (\w+)\(`)
	luaFuncEnd   = regexp.MustCompile(`(?m)^end\n`)
	luaComment   = regexp.MustCompile(`(?m)^[ \t]*--.*\n`)
)

// luaFunc is a top-level `local function` of a script's text: its name
// and its extent, from "local function" to its closing "end" at the
// start of a line.
type luaFunc struct {
	name       string
	start, end int
}

// leanLua returns src without its comment lines and the top-level local
// functions that nothing else in it calls, directly or through another
// function that stays.
func leanLua(src string) string {
	src = luaComment.ReplaceAllString(src, "")
	for {
		var funcs []luaFunc
		for _, m := range luaFuncStart.FindAllStringSubmatchIndex(src, -1) {
			e := luaFuncEnd.FindStringIndex(src[m[1]:])
			if e == nil {
				return src
			}
			funcs = append(funcs, luaFunc{name: src[m[2]:m[3]], start: m[0], end: m[1] + e[1]})
		}
		removed := false
		for i := len(funcs) - 1; i >= 0; i-- {
			f := funcs[i]
			rest := src[:f.start] + src[f.end:]
			if !regexp.MustCompile(`\b` + f.name + `\b`).MatchString(rest) {
				src = rest
				removed = true
				break
			}
		}
		if !removed {
			return strings.TrimLeft(src, "\n")
		}
	}
}
