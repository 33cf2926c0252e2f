package queue

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// luaScript is a script's Lua as written in a Go file: what it is built
// from (prelude, takeFn) and its own body.
type luaScript struct {
	file, name, comment, parts, body string
}

// scriptDecl matches a script's declaration with its doc comment.
var scriptDecl = regexp.MustCompile("(?ms)((?:^//[^\n]*\n)*)^var (\\w+) = redis\\.NewScript\\(((?:[\\w.]+ \\+ )*)`(.*?)`\\)")

// queueScripts reads every script of the package from its Go files, and
// fails if one is built in a way the pattern does not see.
func queueScripts(t *testing.T) []luaScript {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []luaScript
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(b)
		ms := scriptDecl.FindAllStringSubmatch(src, -1)
		require.Equal(t, strings.Count(src, "redis.NewScript("), len(ms), "%s: a script the test cannot read", f)
		for _, m := range ms {
			out = append(out, luaScript{file: f, comment: m[1], name: m[2], parts: m[3], body: m[4]})
		}
	}
	return out
}

// hashCall matches a command on a task hash: its key is tk (every script
// names a task's key so) or KEYS[17] in the scripts whose comment says
// KEYS[17] is the task key. The command may be built as a table (finish).
var hashCall = regexp.MustCompile(`(?:redis\.call\(|\{)'(HSET|HSETNX|HGET|HMGET|HDEL|HINCRBY|HEXISTS)', (tk|KEYS\[17\]), `)

// fieldArgs returns the arguments of a hash command that name fields,
// from the text after its key: every one for HMGET and HDEL, every other
// one for HSET, the first for the others.
func fieldArgs(cmd, rest string) []string {
	var args []string
	depth, start, inStr := 0, 0, false
scan:
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '\'' {
				inStr = false
			}
		case c == '\'':
			inStr = true
		case c == '(' || c == '{' || c == '[':
			depth++
		case (c == ')' || c == '}' || c == ']') && depth > 0:
			depth--
		case c == ')' || c == '}':
			args = append(args, strings.TrimSpace(rest[start:i]))
			break scan
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(rest[start:i]))
			start = i + 1
		}
	}
	switch cmd {
	case "HMGET", "HDEL":
		return args
	case "HSET":
		var fields []string
		for i := 0; i < len(args); i += 2 {
			fields = append(fields, args[i])
		}
		return fields
	}
	return args[:min(1, len(args))]
}

var (
	quotedField = regexp.MustCompile(`^'([^']*)'$`)
	fieldLocal  = regexp.MustCompile(`\bF_[A-Z_]+\b`)
	recordField = regexp.MustCompile(`\br\['([a-z]*)'\]`)
	recSetCall  = regexp.MustCompile(`\brecSet\(`)
	recSetBody  = regexp.MustCompile(`(?s)local function recSet\(id, \.\.\.\)\n.*?\nend\n`)
)

// Every field that a script names on a task hash is declared in wire.go:
// by its Lua local (F_STATE) or by its value ('st'). Every declared field
// is used, and no script reaches a task hash by another key than tk or
// KEYS[17] (where this test would not see it).
func TestScriptsUseOnlyTaskFields(t *testing.T) {
	t.Parallel()
	declared, locals := map[string]bool{}, map[string]bool{}
	for _, f := range taskHashFields {
		require.False(t, declared[f.name], "field %q declared twice", f.name)
		require.False(t, locals[f.lua], "Lua local %s declared twice", f.lua)
		require.Regexp(t, `^[a-z]+$`, f.name)
		require.Regexp(t, `^F_[A-Z_]+$`, f.lua)
		declared[f.name], locals[f.lua] = true, true
	}
	used := map[string]bool{}
	byLocal := map[string]string{}
	for _, f := range taskHashFields {
		byLocal[f.lua] = f.name
	}
	check := func(where, lua string, taskKey17 bool) int {
		uses := 0
		// recSet writes a task's own hash with the fields its callers
		// name (checked below, at each call).
		lua = recSetBody.ReplaceAllString(lua, "")
		for _, loc := range fieldLocal.FindAllString(lua, -1) {
			uses++
			if assert.True(t, locals[loc], "%s: Lua local %s is not a declared task field", where, loc) {
				used[byLocal[loc]] = true
			}
		}
		for _, at := range hashCall.FindAllStringSubmatchIndex(lua, -1) {
			cmd, key := lua[at[2]:at[3]], lua[at[4]:at[5]]
			if key == "KEYS[17]" && !taskKey17 {
				continue
			}
			for _, arg := range fieldArgs(cmd, lua[at[1]:]) {
				if fieldLocal.MatchString(arg) && fieldLocal.FindString(arg) == arg {
					continue // counted above
				}
				m := quotedField.FindStringSubmatch(arg)
				if !assert.NotNil(t, m, "%s: %s on a task names a field by %q: use a literal or its F_ local", where, cmd, arg) {
					continue
				}
				uses++
				if assert.True(t, declared[m[1]], "%s: %s on a task names field %q, which wire.go does not declare", where, cmd, m[1]) {
					used[m[1]] = true
				}
			}
		}
		// A task's record (rec, prelude_records.go): read as r['st'] (r[F_STATE]
		// counted above), set by recSet(id, 'st', v, ...).
		for _, m := range recordField.FindAllStringSubmatch(lua, -1) {
			uses++
			if assert.True(t, declared[m[1]], "%s: a record's field %q, which wire.go does not declare", where, m[1]) {
				used[m[1]] = true
			}
		}
		for _, at := range recSetCall.FindAllStringIndex(lua, -1) {
			if strings.HasSuffix(lua[:at[0]], "function ") {
				continue
			}
			args := fieldArgs("HMGET", lua[at[1]:])
			for i := 1; i < len(args); i += 2 {
				if fieldLocal.MatchString(args[i]) && fieldLocal.FindString(args[i]) == args[i] {
					continue // counted above
				}
				m := quotedField.FindStringSubmatch(args[i])
				if !assert.NotNil(t, m, "%s: recSet names a field by %q: use a literal or its F_ local", where, args[i]) {
					continue
				}
				uses++
				if assert.True(t, declared[m[1]], "%s: recSet names field %q, which wire.go does not declare", where, m[1]) {
					used[m[1]] = true
				}
			}
		}
		assert.NotRegexp(t, `'H[A-Z]+', P_TASK`, lua, "%s: a hash command on a task key built inline; name it tk", where)
		return uses
	}
	// The prelude's bindings are not uses (TestPreludeRendersTheTaskFields
	// checks them).
	require.Equal(t, 1, strings.Count(prelude, fieldLocals()))
	uses := check("prelude", strings.Replace(prelude, fieldLocals(), "", 1), false) +
		check("takeFn", takeFn, false) + check("finishFn", finishFn, false) + check("submitFn", submitFn, false)
	scripts := queueScripts(t)
	for _, s := range scripts {
		uses += check(s.file+": "+s.name, s.body, strings.Contains(s.comment, "KEYS[17] task key"))
	}
	assert.GreaterOrEqual(t, len(scripts), 18, "the scripts were not found")
	assert.GreaterOrEqual(t, uses, 80, "the fields' uses were not found") // 97 when written, 86 once running attempts left the hash
	for _, f := range taskHashFields {
		if f.name == fieldBegan {
			continue // written by earlier versions only (wire.go)
		}
		assert.True(t, used[f.name], "field %q (%s) is declared but no script names it", f.name, f.lua)
	}
}

// The prelude binds each declared field to its Lua local. The names are
// pinned here because they are stored in Redis: changing one orphans
// that field of every task already queued, which must be a decision.
func TestPreludeRendersTheTaskFields(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `local F_STATE = 'st'
local F_PAYLOAD = 'p'
local F_ATTEMPTS = 'att'
local F_MAX_ATTEMPTS = 'max'
local F_TIMEOUT = 'to'
local F_SUBMITTER = 'sub'
local F_OWNER = 'own'
local F_RETENTION = 'ret'
local F_SUBMITTED = 'enq'
local F_DUE = 'due'
local F_BEGAN = 'beg'
local F_FINISHED = 'fin'
local F_ERRORS = 'errs'
local F_LAST_LATER = 'lerr'
local F_RESULT = 'res'
local F_CANCEL = 'cx'
local F_TENANT = 'ten'
local F_NONCE = 'n'
local F_BATCH = 'b'
local F_PRIORITY = 'pri'
local F_DEDUP_KEY = 'dk'
local F_TRACE = 'tc'
local F_PROGRESS = 'pg'
local F_PERMANENT = 'perm'
`, fieldLocals())
	assert.Equal(t, 1, strings.Count(prelude, fieldLocals()), "the prelude does not bind the fields")
}

// TestFieldDefaults ties the defaults the scripts leave out of the task
// hash to the package's.
func TestFieldDefaults(t *testing.T) {
	assert.Equal(t, strconv.Itoa(DefaultMaxAttempts), defaultMaxField)
	assert.Equal(t, strconv.FormatInt(DefaultTimeout.Milliseconds(), 10), defaultTimeoutField)
	assert.Equal(t, strconv.FormatInt(DefaultRetention.Milliseconds(), 10), defaultRetentionField)
	assert.Equal(t, strconv.Itoa(recordMaxPayload), recordMaxPayloadText)
}

// A task stores only what differs from the defaults, and every reader
// shows the defaults: a task of default options holds its payload,
// state, submitter and submission time; one of other options holds them.
func TestDefaultFieldsAreLeftOut(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	fields := func(id string) []string {
		var names []string
		for f := range storedTask(t, ctx, q.rdb, q.lay, id) {
			names = append(names, f)
		}
		sort.Strings(names)
		return names
	}

	plain, err := q.Submit(ctx, []byte("a"))
	require.NoError(t, err)
	assert.Regexp(t, `^[a-z2-7]{16}$`, plain.ID(), "a random id: 70 random bits and a time window, in base32")
	assert.Equal(t, []string{fieldSubmitted, fieldPayload, fieldState, fieldSubmitter}, fields(plain.ID()))
	info, err := q.Inspect(ctx, plain.ID())
	require.NoError(t, err)
	assert.Equal(t, 0, info.Attempt)
	assert.Equal(t, DefaultMaxAttempts, info.MaxAttempts)
	assert.Equal(t, DefaultTimeout, info.Timeout)
	assert.Equal(t, info.Submitted, info.Due)
	assert.Equal(t, "", info.Tenant)

	other, err := q.Submit(ctx, []byte("b"), WithTaskID("other"), WithMaxAttempts(3), WithTimeout(2*time.Second),
		WithRetention(time.Hour), WithDelay(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []string{fieldDue, fieldSubmitted, fieldMaxAttempts, fieldNonce, fieldPayload, fieldRetention, fieldState,
		fieldSubmitter, fieldTimeout}, fields(other.ID()))
	info, err = q.Inspect(ctx, other.ID())
	require.NoError(t, err)
	assert.Equal(t, 3, info.MaxAttempts)
	assert.Equal(t, 2*time.Second, info.Timeout)
	assert.Equal(t, info.Submitted.Add(time.Hour), info.Due)
	assert.Zero(t, q.rdb.Exists(ctx, q.lay.task(other.ID())).Val(), "a task not finished is a record in tasks, not a key of its own")

	// Finished with an empty result: no result field, the default
	// retention.
	serve(t, q, func(context.Context, *Task) ([]byte, error) { return nil, nil }, WithWorkers(1))
	res, err := wait(t, plain, 5*time.Second)
	require.NoError(t, err)
	assert.Empty(t, res)
	assert.NotContains(t, fields(plain.ID()), fieldResult)
	res, err = q.Result(ctx, plain.ID())
	require.NoError(t, err)
	assert.Empty(t, res)
	info, err = q.Inspect(ctx, plain.ID())
	require.NoError(t, err)
	assert.Equal(t, StateDone, info.State)
	assert.Equal(t, 1, info.Attempt)
	ttl, err := q.rdb.PTTL(ctx, q.lay.task(plain.ID())).Result()
	require.NoError(t, err)
	assert.InDelta(t, DefaultRetention.Seconds(), ttl.Seconds(), 60)
}

// A plain Submit (every option at its default, a random id: 3 arguments)
// stores its task as the full form with the default values does, in the
// same call.
func TestPlainSubmitStoresWhatTheFullFormDoes(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	args := q.lay.commonArgs(q.proc, 100,
		"plain", "p", "",
		"full", "p", "1", DefaultMaxAttempts, DefaultTimeout.Milliseconds(), 0, DefaultRetention.Milliseconds(), "full", "", "", "ff", 0, "", 0, "")
	res, err := submitScript.Run(ctx, q.rdb, q.lay.common(), args...).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), res, "both queued")
	plain := storedTask(t, ctx, q.rdb, q.lay, "plain")
	full := storedTask(t, ctx, q.rdb, q.lay, "full")
	assert.Equal(t, full, plain)
	assert.Len(t, plain, 4)
	ready := q.rdb.LRange(ctx, q.lay.ready, 0, -1).Val()
	assert.ElementsMatch(t, []string{"plain", "full"}, ready)

	// Refused, a plain task gets its status, the others theirs.
	res, err = submitScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(q.proc, 100, "fresh", "p", "", "full", "p", "1", 25, 60000, 0, 86400000, "nonce-2", "", "", "ff", 0, "", 0, "")...).Result()
	require.NoError(t, err)
	assert.Equal(t, []any{"OK", "DUP"}, res)
}
