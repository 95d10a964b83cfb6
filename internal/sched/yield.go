package sched

import "runtime"

// yieldEvery is how many jobs a cycle's longest loops (deciding the queue,
// comparing its reasons) go through between offers of their processor to
// other goroutines. A cycle over 100,000 pending jobs holds a processor
// for 50 to 100 ms, and Go takes it back only every 10 ms: on a 2-core
// leader, the API's and raft's goroutines queued behind it waited up to
// that long each, in every cycle (issue 18). A yield is a few hundred
// nanoseconds every 1,024 jobs; with nothing waiting the cycle goes on at
// once.
const yieldEvery = 1024

// yieldAt offers the processor when i is the last of a run of yieldEvery.
func yieldAt(i int) {
	if i%yieldEvery == yieldEvery-1 {
		runtime.Gosched()
	}
}
