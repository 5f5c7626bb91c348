package router

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that decodes from a Go duration string ("10s", "2m") or from a
// number of seconds, so policy parameters read naturally in YAML and JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*d = Duration(x * float64(time.Second))
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("router: duration %q: %w", x, err)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("router: duration: want a string like \"10s\" or seconds, got %s", b)
	}
	return nil
}
