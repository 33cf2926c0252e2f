package chaos_test

import (
	"fmt"

	"github.com/shepherd-go/shepherd/examples/chaos"
)

// Check replays a log: here a job whose process was killed restarts
// elsewhere 1.2s later, and another acknowledged job never runs again.
func ExampleCheck() {
	r := chaos.Check([]chaos.Entry{
		{Event: chaos.EvStart, Proc: "p1", Worker: "w0", Key: "a", Ms: 1000},
		{Event: chaos.EvDispatch, Key: "a", Ms: 1001},
		{Event: chaos.EvStart, Proc: "p1", Worker: "w1", Key: "b", Ms: 1002},
		{Event: chaos.EvDispatch, Key: "b", Ms: 1003},
		{Event: chaos.EvKill, Proc: "p1", Ms: 2000},
		{Event: chaos.EvStart, Proc: "p2", Worker: "w0", Key: "a", Ms: 3200},
	})
	fmt.Println(r.Recoveries, r.Lost, r.Running["a"])
	fmt.Println(r.AtRest())
	// Output:
	// [1.2s] [b] [p2/w0]
	// chaos: 1 acknowledged jobs not running (lost): b
}
