// Package member is the membership layer the pool, the queue and the
// stream consumers stand on: what makes a process a member of a unit (a
// pool, a queue, a consumer group) and keeps one mechanism for one idea.
//
// Today it holds the one-holder lease (the pool's janitor, a consumer
// group's reclaimer) and the Lua helpers that owners' scripts are built
// from, so that a transition and the lease or keep-alive check that
// fences it stay one atomic script in the owner:
//
//	var myScript = redis.NewScript(member.Lua + `
//	if not lease_held(KEYS[1], ARGV[1]) then return -1 end
//	...`)
//
// Every time it compares is Redis's (TIME), never a process's clock.
// Owners keep their key names in their own layouts and pass them in.
package member
