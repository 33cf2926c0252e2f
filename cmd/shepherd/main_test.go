package main

import (
	"bytes"
	"testing"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
)

// srv is a Redis shared by the command's tests; isolate with redistest.Name.
var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, exitUsage, run(nil, &out, &errOut))
	assert.Contains(t, errOut.String(), "shepherd [command]")
	errOut.Reset()
	assert.Equal(t, exitUsage, run([]string{"nope"}, &out, &errOut))
	assert.Contains(t, errOut.String(), `unknown command "nope"`)
	errOut.Reset()
	assert.Equal(t, exitOK, run([]string{"-h"}, &out, &errOut))
	assert.Contains(t, out.String(), "Exit codes")
}
