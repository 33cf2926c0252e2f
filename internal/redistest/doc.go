// Package redistest runs real Redis servers for tests: never a fake.
//
// Start launches a private redis-server on a free 127.0.0.1 port, with no
// persistence unless asked, in a temporary data directory of its own. The
// returned Server can be killed (SIGKILL), stopped, restarted on the same
// port with the same data directory, and frozen (SIGSTOP/SIGCONT), so fault
// tests can take Redis away for real. Everything a Server starts is stopped
// and removed when the test (or Close) ends; a Server never touches a Redis
// it did not start.
//
// When no redis-server binary is on PATH, Start falls back to a Redis 7
// container through testcontainers-go. When neither works it fails the test
// with a message saying what to install; it never skips.
//
// A test binary may share one server between its tests through Main in
// TestMain; tests then isolate themselves with Name, which gives each test
// a unique prefix for its keys, and run with t.Parallel().
package redistest
