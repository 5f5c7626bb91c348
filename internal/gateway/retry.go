package gateway

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
)

// The failure classes of an attempt at a backend that LimitsConfig.RetryOn names. Each is a
// failure before the backend's response head, so before any byte of the response reached
// the client; the failure rule may try the request on another backend after it.
const (
	// RetryConnect: the connection could not be made (refused, unreachable, dial timeout), so
	// nothing was sent.
	RetryConnect = "connect"
	// RetryReset: the connection was made, then failed before a response head came: reset,
	// closed, or a head that could not be read. The backend may have received the request.
	RetryReset = "reset"
	// RetryBusy: the backend answered 503 or 429, the statuses servers refuse work with
	// before reading it (uvicorn's --limit-concurrency, rate limiters).
	RetryBusy = "busy"
	// RetryHeaderTimeout: no response head came within TimeoutsConfig.Header. The attempt's
	// connection is closed, which makes vLLM abort the request. A non-streamed completion
	// sends its head only when done: one longer than the header timeout fails everywhere.
	RetryHeaderTimeout = "header_timeout"
)

// retryClasses are the failure classes, each retried unless LimitsConfig.RetryOn leaves it out.
var retryClasses = []string{RetryConnect, RetryReset, RetryBusy, RetryHeaderTimeout}

// failureClass returns the failure class of an attempt that ended with err, or with resp when
// err is nil, or "" when the rule never retries it: a response of a status other than 503
// or 429, the request's deadline (TimeoutsConfig.Request), the client gone. err is the
// transport's error as the request's clock reports it.
func failureClass(err error, resp *http.Response) string {
	switch {
	case err == nil && busyStatus(resp.StatusCode):
		return RetryBusy
	case err == nil, errors.Is(err, errClientGone), errors.Is(err, ErrRequestTimeout):
		return ""
	case errors.Is(err, ErrHeaderTimeout):
		return RetryHeaderTimeout
	case isTimeout(err): // the later phases start after the head: not a failure before it
		return ""
	case isDialError(err):
		return RetryConnect
	}
	return RetryReset
}

// retryable reports whether the failure rule tries the request on another backend after an
// attempt that ended with err, or with resp when err is nil: the attempt failed in a class
// RetryOn names (every class when RetryOn is nil). MaxRetries bounds how often: the
// request's router.Ticket counts (CanRetry, Retry).
func (l LimitsConfig) retryable(err error, resp *http.Response) bool {
	class := failureClass(err, resp)
	return class != "" && (l.RetryOn == nil || slices.Contains(l.RetryOn, class))
}

// validateRetryOn checks RetryOn: nil, or known classes, each once.
func (l LimitsConfig) validateRetryOn() error {
	if l.RetryOn != nil && len(l.RetryOn) == 0 {
		return errors.New("limits.retry_on: empty; leave it out to retry every class, or set limits.max_retries: 0")
	}
	var errs []error
	for i, c := range l.RetryOn {
		switch {
		case !slices.Contains(retryClasses, c):
			errs = append(errs, fmt.Errorf("limits.retry_on[%d] %q: want one of %v", i, c, retryClasses))
		case slices.Index(l.RetryOn, c) < i:
			errs = append(errs, fmt.Errorf("limits.retry_on[%d] %q: listed twice", i, c))
		}
	}
	return errors.Join(errs...)
}

// busyStatus reports the statuses servers refuse work with before reading it.
func busyStatus(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// isDialError reports errors of connecting, before any byte of the request was written.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
