package sim_test

import (
	"fmt"
	"time"

	"kvroute/sim"
)

func ExampleKernel() {
	k := sim.NewKernel()
	k.Schedule(sim.At(2*time.Second), 0, func(now sim.Time) { fmt.Println("second event at", now) })
	k.Schedule(sim.At(time.Second), 0, func(now sim.Time) {
		fmt.Println("first event at", now)
		k.After(sim.At(500*time.Millisecond), 0, func(now sim.Time) { fmt.Println("scheduled by the first, at", now) })
	})
	if err := k.Run(sim.Never); err != nil {
		fmt.Println(err)
	}
	// Output:
	// first event at 1s
	// scheduled by the first, at 1.5s
	// second event at 2s
}
