package dashboard

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Without a browser, the browser tests skip and say how to run them,
// unless SHEPHERD_REQUIRE_BROWSER is set (as .ci/run sets it): then they
// fail, so CI never skips them.
func TestWithoutBrowserSkipsUnlessRequired(t *testing.T) {
	t.Parallel()
	missing := errors.New(noChromium)
	skip, why := withoutBrowser(missing, "")
	assert.True(t, skip)
	assert.Contains(t, why, "install it")
	assert.Contains(t, why, requireBrowser+"=1 makes this a failure")
	skip, why = withoutBrowser(missing, "1")
	assert.False(t, skip)
	assert.Contains(t, why, "install it")
}
