package streaming_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/streaming"
)

// exampleClient returns a client of a private Redis for the examples;
// real code passes its own redis.UniversalClient.
func exampleClient() (redis.UniversalClient, func()) {
	srv, err := redistest.New()
	if err != nil {
		panic(err)
	}
	return srv.Client(), func() { _ = srv.Close() }
}

// A producer appends events; a sink in consumer group "routers" receives
// each one at least once and acknowledges it.
func ExampleSink() {
	rdb, done := exampleClient()
	defer done()
	ctx := context.Background()

	jobs, err := streaming.NewStream(rdb, "pool-a", "jobs")
	if err != nil {
		panic(err)
	}
	sink, err := streaming.NewSink(ctx, jobs, "routers", streaming.WithAckGracePeriod(10*time.Second))
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := sink.Close(ctx); err != nil {
			panic(err)
		}
	}()

	if _, err := jobs.Add(ctx, "start", []byte(`{"key":"tenant-42"}`), streaming.WithTopic("tenant-42")); err != nil {
		panic(err)
	}
	ev := <-sink.Subscribe()
	fmt.Println(ev.Event, ev.Topic, string(ev.Payload))
	if err := sink.Ack(ctx, ev); err != nil {
		panic(err)
	}
	// Output: start tenant-42 {"key":"tenant-42"}
}

// AddBatch appends many entries in one round trip.
func ExampleStream_AddBatch() {
	rdb, done := exampleClient()
	defer done()
	ctx := context.Background()

	s, err := streaming.NewStream(rdb, "pool-a", "worker-1")
	if err != nil {
		panic(err)
	}
	ids, err := s.AddBatch(ctx, []streaming.Entry{
		{Event: "start", Topic: "k1"},
		{Event: "start", Topic: "k2"},
	})
	if err != nil {
		panic(err)
	}
	n, err := s.Len(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), n)
	// Output: 2 2
}

// A reader sees every entry added after it was created, even before
// Subscribe is called; every reader sees all of them.
func ExampleReader() {
	rdb, done := exampleClient()
	defer done()
	ctx := context.Background()

	s, err := streaming.NewStream(rdb, "pool-a", "events")
	if err != nil {
		panic(err)
	}
	r, err := streaming.NewReader(ctx, s)
	if err != nil {
		panic(err)
	}
	defer func() {
		if err := r.Close(ctx); err != nil {
			panic(err)
		}
	}()

	for _, name := range []string{"joined", "left"} {
		if _, err := s.Add(ctx, name, nil); err != nil {
			panic(err)
		}
	}
	ch := r.Subscribe()
	fmt.Println((<-ch).Event, (<-ch).Event)
	// Output: joined left
}

// A consumer whose process is known to be dead (here: it read an entry
// and never came back) holds its entries until the ack grace period ends;
// TakeOver hands them to a live sink at once. Consumers lists who is in
// the group.
func ExampleSink_TakeOver() {
	rdb, done := exampleClient()
	defer done()
	ctx := context.Background()
	jobs, err := streaming.NewStream(rdb, "pool-a", "jobs")
	if err != nil {
		panic(err)
	}
	if _, err := jobs.Add(ctx, "start", []byte("held"), streaming.WithTopic("tenant-7")); err != nil {
		panic(err)
	}
	// A consumer that reads and then dies.
	if err := rdb.XGroupCreate(ctx, jobs.Key(), "routers", "0").Err(); err != nil {
		panic(err)
	}
	if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "routers", Consumer: "dead",
		Streams: []string{jobs.Key(), ">"}, Block: -1}).Err(); err != nil {
		panic(err)
	}

	sink, err := streaming.NewSink(ctx, jobs, "routers", streaming.WithConsumer("alive"),
		streaming.WithAckGracePeriod(time.Hour))
	if err != nil {
		panic(err)
	}
	defer sink.Close(ctx)
	n, err := sink.TakeOver(ctx, "dead")
	if err != nil {
		panic(err)
	}
	ev := <-sink.Subscribe()
	fmt.Println(n, ev.Topic, string(ev.Payload), ev.Reclaimed)
	consumers, err := sink.Consumers(ctx)
	if err != nil {
		panic(err)
	}
	for _, c := range consumers {
		fmt.Println(c.Name, c.Pending)
	}
	// Output:
	// 1 tenant-7 held true
	// alive 1
}

// With WithMembers the sinks' consumers are members of a unit that keeps
// them alive in its own hash (here by hand; a pool's nodes do it with
// their keep-alives). A consumer whose member stopped keeping alive has
// its unacknowledged entries taken over by a live sink within about the
// TTL, delivered again with Reclaimed set.
func ExampleWithMembers() {
	rdb, done := exampleClient()
	defer done()
	ctx := context.Background()

	jobs, err := streaming.NewStream(rdb, "pool-b", "jobs")
	if err != nil {
		panic(err)
	}
	// The unit's keep-alive hash, in the stream's Cluster slot: member →
	// when last seen (ms, Redis TIME).
	alive := jobs.Key() + ":members"
	now := func() int64 {
		t, err := rdb.Time(ctx).Result()
		if err != nil {
			panic(err)
		}
		return t.UnixMilli()
	}
	const ttl = time.Second
	if err := rdb.HSet(ctx, alive, "n:a", now(), "n:b", now()).Err(); err != nil {
		panic(err)
	}
	a, err := streaming.NewSink(ctx, jobs, "routers", streaming.WithConsumer("a"), streaming.WithMembers(alive, "n:", ttl))
	if err != nil {
		panic(err)
	}
	if _, err := jobs.Add(ctx, "start", []byte("job-1")); err != nil {
		panic(err)
	}
	ev := <-a.Subscribe()
	fmt.Println("a got", string(ev.Payload), "and dies before its ack")
	_ = a.Close(ctx) // its consumer keeps the entry: a dead process acks nothing

	b, err := streaming.NewSink(ctx, jobs, "routers", streaming.WithConsumer("b"), streaming.WithMembers(alive, "n:", ttl))
	if err != nil {
		panic(err)
	}
	defer func() { _ = b.Close(ctx) }()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // b's member keeps alive; a's no longer does
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 4):
				_ = rdb.HSet(ctx, alive, "n:b", now()).Err()
			}
		}
	}()
	ev = <-b.Subscribe()
	fmt.Println("b got", string(ev.Payload), "reclaimed:", ev.Reclaimed)
	if err := b.Ack(ctx, ev); err != nil {
		panic(err)
	}
	// Output:
	// a got job-1 and dies before its ack
	// b got job-1 reclaimed: true
}
