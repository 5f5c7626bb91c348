package sim

import (
	"fmt"
	"time"
)

// Time is virtual time in nanoseconds since the start of a run.
type Time int64

// Never is a time after every event.
const Never Time = 1<<63 - 1

// At converts a duration since the start of the run to a Time.
func At(d time.Duration) Time { return Time(d) }

// Duration returns t as a duration since the start of the run.
func (t Time) Duration() time.Duration { return time.Duration(t) }

// Seconds returns t in seconds.
func (t Time) Seconds() float64 { return float64(t) / 1e9 }

// Add returns t + d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t − u as a duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// String formats t as a duration.
func (t Time) String() string {
	if t == Never {
		return "never"
	}
	return fmt.Sprint(time.Duration(t))
}
