package jumphash_test

import (
	"fmt"

	"github.com/shepherd-go/shepherd/jumphash"
)

func ExampleHash() {
	fmt.Println(jumphash.Hash(42, 57))
	fmt.Println(jumphash.Hash(256, 1024))
	// Output:
	// 43
	// 520
}

func ExampleHashString() {
	// A key keeps its bucket when a bucket is added, unless it moves into
	// the new one.
	before := jumphash.HashString("tenant-42", 10)
	after := jumphash.HashString("tenant-42", 11)
	fmt.Println(before == after || after == 10)
	// Output: true
}

func ExampleHashLive() {
	// Four worker slots; the worker in slot 1 has left. Keys that were on
	// slot 1 move to the others; no other key moves.
	alive := []bool{true, false, true, true}
	live := func(slot int) bool { return alive[slot] }
	moved := 0
	for i := 0; i < 1000; i++ {
		key := uint64(i) * 0x9e3779b97f4a7c15
		before, after := jumphash.Hash(key, 4), jumphash.HashLive(key, 4, live)
		if before != after {
			if before != 1 {
				fmt.Println("a survivor's key moved")
			}
			moved++
		}
	}
	fmt.Println(moved > 0 && moved < 400)
	// Output: true
}
