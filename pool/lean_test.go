package pool

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// leanLua keeps the functions a script calls, directly or through one
// another, and drops the rest and the comment lines.
func TestLeanLuaDropsWhatNothingCalls(t *testing.T) {
	t.Parallel()
	src := `-- a comment
local K = 1
local function unused(x)
  return used(x)
end
local function helper(x)
  return x + K
end
local function used(x)
  -- calls helper
  return helper(x)
end
return used(1)
`
	assert.Equal(t, `local K = 1
local function helper(x)
  return x + K
end
local function used(x)
  return helper(x)
end
return used(1)
`, leanLua(src))
}
