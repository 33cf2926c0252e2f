package limit

import (
	"fmt"
	"time"
)

// invalidf returns an error wrapping ErrInvalidOption.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// checkPositive returns an error unless d > 0.
func checkPositive(name string, d time.Duration) error {
	if d <= 0 {
		return invalidf("%s must be positive, got %v", name, d)
	}
	return nil
}

// checkRatio returns an error unless lo < v <= hi.
func checkRatio(name string, v, lo, hi float64) error {
	if !(v > lo && v <= hi) {
		return invalidf("%s must be in (%g, %g], got %g", name, lo, hi, v)
	}
	return nil
}
