package dashboard

// RedisAddr is the address of the package's test Redis, for the examples
// (package dashboard_test).
func RedisAddr() string { return srv.Addr() }
