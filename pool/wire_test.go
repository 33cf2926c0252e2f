package pool

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scripts use only the record fields that record defines, so that the
// Go struct is the one definition of the record.
func TestScriptsUseOnlyRecordFields(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	rt := reflect.TypeOf(record{})
	for i := range rt.NumField() {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		defined[tag] = true
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	scriptRe := regexp.MustCompile("(?s)NewScript\\(prelude (?:\\+ \\w+ )*\\+ `(.*?)`\\)")
	fieldRe := regexp.MustCompile(`\b(?:r|cur)\.([a-z]+)\b`)
	scripts, uses := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range scriptRe.FindAllStringSubmatch(string(b), -1) {
			scripts++
			for _, u := range fieldRe.FindAllStringSubmatch(m[1], -1) {
				uses++
				assert.True(t, defined[u[1]], "%s: a script uses record field %q, which record does not define", f, u[1])
			}
		}
	}
	for _, u := range fieldRe.FindAllStringSubmatch(prelude, -1) {
		uses++
		assert.True(t, defined[u[1]], "the prelude uses record field %q, which record does not define", u[1])
	}
	assert.GreaterOrEqual(t, scripts, 10, "the scripts were not found")
	assert.Greater(t, uses, 50)
}

// The prelude renders the Go constants into the scripts.
func TestPreludeRendersTheConstants(t *testing.T) {
	t.Parallel()
	for _, want := range []string{
		`local S_QUEUED, S_ROUTED, S_CLAIMED, S_RUNNING, S_STOPPING = "q", "r", "c", "run", "x"`,
		`local EV_START, EV_STOP, EV_NOTIFY, EV_REPLY = "start", "stop", "notify", "reply"`,
		`local REV_FIELD = "rev"`,
	} {
		assert.Contains(t, prelude, want)
	}
}
