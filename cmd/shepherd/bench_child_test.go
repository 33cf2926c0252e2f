package main

import "os"

// The bench re-executes its own binary as a worker process (scenario C).
// Under go test that binary is the test binary: run the command it was
// asked for instead of the tests.
func init() {
	if os.Getenv(benchChildEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}
