package governor

import (
	"errors"
	"fmt"
	"time"
)

// ErrAbsent is matched (errors.Is) by an AbsentError.
var ErrAbsent = errors.New("sensor absent")

// AbsentError says a sensor's source does not exist on this machine, e.g.
// NVML without a GPU. Callers report it plainly and fall back to simulated
// sensors; it is never a silent zero reading.
type AbsentError struct {
	Sensor string
	Reason string
	Err    error
}

func (e *AbsentError) Error() string {
	return fmt.Sprintf("%s sensor absent: %s", e.Sensor, e.Reason)
}

// Is makes errors.Is(err, ErrAbsent) true.
func (e *AbsentError) Is(target error) bool { return target == ErrAbsent }

func (e *AbsentError) Unwrap() error { return e.Err }

// ConfigError names the config file, the field and the fix.
type ConfigError struct {
	File  string
	Field string
	Msg   string
	Fix   string
	Err   error // the cause, when there is one to classify (textcheck.ErrInvalidUTF8)
}

func (e *ConfigError) Error() string {
	s := e.File + ": "
	if e.Field != "" {
		s += e.Field + ": "
	}
	s += e.Msg
	if e.Fix != "" {
		s += " (" + e.Fix + ")"
	}
	return s
}

// Unwrap is the cause, or nil.
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrStale is matched by a StaleError.
var ErrStale = errors.New("stale")

// StaleError reports that something that must be fresh is not: the fault
// suite's last pass or the watchdog heartbeat.
type StaleError struct {
	What string
	Last time.Time // zero when there never was one
	Max  time.Duration
	Fix  string
}

func (e *StaleError) Error() string {
	if e.Last.IsZero() {
		return fmt.Sprintf("%s: none recorded (%s)", e.What, e.Fix)
	}
	return fmt.Sprintf("%s: last at %s, older than %s (%s)", e.What, e.Last.UTC().Format(time.RFC3339), e.Max, e.Fix)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }
