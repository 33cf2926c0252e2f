package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A -redis address where something else answers (a web server) is named
// as not Redis, rather than with the parser's complaint alone.
func TestAnAddressThatIsNotRedis(t *testing.T) {
	t.Parallel()
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	addr := strings.TrimPrefix(web.URL, "http://")
	for _, args := range [][]string{
		{"status", "-pool", "p", "-redis", addr},
		{"queue", "stats", "-queue", "q", "-redis", addr},
		{"pools", "-redis", addr},
	} {
		code, _, errOut := runCmd(args...)
		assert.Equal(t, exitError, code, "%v", args)
		assert.Contains(t, errOut, "redis at "+addr+": not a Redis server", "%v", args)
		assert.Contains(t, errOut, "HTTP/1.1 400", "%v: the answer is quoted", args)
	}
}

// A queue or pool that is not found is named with the names that exist,
// and the closest as a suggestion.
func TestNotFoundListsTheNames(t *testing.T) {
	t.Parallel()
	name, _, _ := openQueue(t)
	code, _, errOut := runCmd("queue", "stats", "-queue", name+"x", "-redis", srv.Addr())
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, `queue "`+name+`x" not found (did you mean `+name+`?); the queues here: `)
	assert.Regexp(t, `the queues here: (.*, )?`+name+`(,|\n)`, errOut)

	code, _, errOut = runCmd("status", "-pool", "zz-no-such-pool-anywhere-"+name, "-redis", srv.Addr())
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, `pool "zz-no-such-pool-anywhere-`+name+`" not found`)
	assert.NotContains(t, errOut, "did you mean")
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"newcomr", "newcomer", 1}, {"kitten", "sitting", 3}, {"abc", "acb", 2}} {
		assert.Equal(t, tc.d, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.d, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}
