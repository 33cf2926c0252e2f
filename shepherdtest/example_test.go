package shepherdtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

// resize is the handler under test: it reports its progress and fails
// for good on a payload it cannot use.
func resize(ctx context.Context, t *queue.Task) ([]byte, error) {
	if len(t.Payload) == 0 {
		return nil, queue.Permanent(errors.New("empty image"))
	}
	if err := t.Progress(ctx, 50, "decoded"); err != nil {
		return nil, err
	}
	return []byte("thumb of " + string(t.Payload)), nil
}

func ExampleRunTask() {
	ctx := context.Background()
	run := shepherdtest.RunTask(ctx, resize, []byte("cat.png"))
	fmt.Println(run.Outcome, string(run.Result))
	for _, p := range run.Progress {
		fmt.Println("progress:", p.Value, p.Message, "attempt", p.Attempt)
	}

	run = shepherdtest.RunTask(ctx, resize, nil)
	fmt.Println(run.Outcome, run.Err)
	// Output:
	// done thumb of cat.png
	// progress: 50 decoded attempt 1
	// dead empty image
}

// A handler run as the last attempt of its task: its failure makes the
// task a dead letter.
func ExampleRunTask_lastAttempt() {
	flaky := func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return nil, fmt.Errorf("attempt %d of %d failed (tenant %s)", t.Attempt, t.MaxAttempts, t.Tenant)
	}
	ctx := context.Background()
	run := shepherdtest.RunTask(ctx, flaky, nil, shepherdtest.WithAttempt(1), shepherdtest.WithMaxAttempts(3), shepherdtest.WithTenant("acme"))
	fmt.Println(run.Outcome, run.Err)
	run = shepherdtest.RunTask(ctx, flaky, nil, shepherdtest.WithAttempt(3), shepherdtest.WithMaxAttempts(3), shepherdtest.WithTenant("acme"))
	fmt.Println(run.Outcome, run.Err)
	// Output:
	// retry attempt 1 of 3 failed (tenant acme)
	// dead attempt 3 of 3 failed (tenant acme)
}

func ExampleRunTaskWith() {
	type db struct{ name string }
	lookup := func(ctx context.Context, d *db, t *queue.Task) ([]byte, error) {
		return []byte(d.name + ": " + string(t.Payload)), nil
	}
	run := shepherdtest.RunTaskWith(context.Background(), &db{"users"}, lookup, []byte("ada"))
	fmt.Println(run.Outcome, string(run.Result))
	// Output: done users: ada
}

func ExampleRedis() {
	t := newT() // in a test: the test's *testing.T
	defer t.finish()

	ctx := context.Background()
	rdb := shepherdtest.Redis(t)
	rdb.Set(ctx, "greeting", "hello", 0)
	fmt.Println(rdb.Get(ctx, "greeting").Val())
	// Output: hello
}

func ExampleQueue_Work() {
	t := newT() // in a test: the test's *testing.T
	defer t.finish()

	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "thumbnails")
	// The code under test submits to q.Queue, a *queue.Queue.
	if _, err := q.Submit(ctx, []byte("cat.png"), queue.WithPriority(2)); err != nil {
		panic(err)
	}
	if _, err := q.Submit(ctx, nil); err != nil {
		panic(err)
	}

	q.Work(t, resize)

	done := q.RequireTask(t, shepherdtest.InState(queue.StateDone))
	fmt.Println(string(done.Payload), "priority", done.Priority, "->", string(done.Result))
	dead := q.RequireTask(t, shepherdtest.InState(queue.StateDead))
	fmt.Println("dead:", dead.Errors[0].Err)
	// Output:
	// cat.png priority 2 -> thumb of cat.png
	// dead: empty image
}

func ExampleQueue_RequireTask() {
	t := newT() // in a test: the test's *testing.T
	defer t.finish()

	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "emails")
	if err := q.SetTenant(ctx, "acme", 5); err != nil {
		panic(err)
	}
	// What the code under test would submit:
	type email struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
	}
	if _, err := q.Submit(ctx, []byte(`{"subject": "Welcome", "to": "ada@example.com"}`),
		queue.WithTenant("acme"), queue.WithDedup("welcome:ada", time.Hour)); err != nil {
		panic(err)
	}

	task := q.RequireTask(t, shepherdtest.PayloadJSON(email{To: "ada@example.com", Subject: "Welcome"}), shepherdtest.Tenant("acme"))
	fmt.Println(task.State, task.DedupKey)
	q.RequireNoTask(t, shepherdtest.Tenant("globex"))
	// Output: waiting welcome:ada
}

// lamp is the pool's JobHandler under test.
type lamp struct{}

func (lamp) Start(ctx context.Context, job *pool.Job) error { return nil }
func (lamp) Stop(ctx context.Context, key string) error     { return nil }

func ExampleStartPool() {
	t := newT() // in a test: the test's *testing.T
	defer t.finish()

	ctx := context.Background()
	p := shepherdtest.StartPool(t, shepherdtest.Redis(t), "lamps", lamp{}, shepherdtest.WithNodes(2))
	if err := p.Node().DispatchJob(ctx, "kitchen", []byte("on")); err != nil {
		panic(err)
	}
	job := p.RequireRunning(t, "kitchen")
	fmt.Println(job.Key, job.State, string(job.Payload))

	if err := p.Nodes[1].StopJob(ctx, "kitchen"); err != nil {
		panic(err)
	}
	p.RequireStopped(t, "kitchen")
	fmt.Println(len(p.Jobs(t)), "jobs")
	// Output:
	// kitchen running on
	// 0 jobs
}
