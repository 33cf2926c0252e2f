// Package shepherdtest helps test code that uses shepherd's queue and
// pool, on a real Redis: never a mock.
//
// # A private Redis
//
// Redis starts a redis-server of the test's own (from PATH, else the
// redis:7 image in Docker) and returns a client of it; it is removed when
// the test ends, so tests run in parallel without sharing keys. When
// neither redis-server nor Docker is available the test fails with what
// to install.
//
//	rdb := shepherdtest.Redis(t)
//
// # A handler, without Redis
//
// RunTask runs a queue.Handler once with a real *queue.Task, as a
// serving process's worker would: its ctx ends at the attempt's timeout,
// a panic becomes the attempt's error, Task.Progress calls are recorded.
// The TaskRun it returns says what the queue would do next (done, retry,
// later, dead).
//
//	run := shepherdtest.RunTask(ctx, app.Resize, payload, shepherdtest.WithAttempt(3), shepherdtest.WithMaxAttempts(3))
//	require.Equal(t, shepherdtest.OutcomeDead, run.Outcome)
//
// # A queue, served until idle
//
// OpenQueue opens a queue on the private Redis. The test submits to it,
// or passes it to the code under test; Work serves it in the test's
// process until nothing is waiting, running, or due soon; then
// RequireTask and its siblings assert what was submitted (payload,
// tenant, priority, deduplication key, delay) and how each task ended
// (done with its result, dead with its errors, cancelled), with Matches:
//
//	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "emails")
//	app.Signup(ctx, q.Queue, "ada@example.com") // submits a welcome email
//	q.RequireTask(t, shepherdtest.PayloadJSON(app.Email{To: "ada@example.com"}), shepherdtest.InState(queue.StateWaiting))
//	q.Work(t, app.SendEmail)
//	q.RequireTask(t, shepherdtest.InState(queue.StateDone), shepherdtest.Result([]byte("sent")))
//
// # A pool, in one process
//
// StartPool runs a pool's nodes and workers in the test's process, shut
// down when the test ends. RequireRunning waits until a job runs on
// exactly one worker and returns what pool.InspectJob says of it;
// RequireStopped waits until it is gone; Jobs lists the settled pool's
// jobs.
//
//	p := shepherdtest.StartPool(t, shepherdtest.Redis(t), "ingest", app.Ingester{})
//	require.NoError(t, p.Node().DispatchJob(ctx, "tenant-42", []byte("cfg")))
//	job := p.RequireRunning(t, "tenant-42")
//
// The guide is docs/testing.md.
package shepherdtest
