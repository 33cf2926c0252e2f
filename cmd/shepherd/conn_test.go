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
