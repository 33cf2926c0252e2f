package limit

// Fixed is an Algorithm whose limit never changes. It is the baseline for
// comparisons and the right choice when the capacity is known.
type Fixed struct {
	limit int
}

// NewFixed returns a Fixed limit. limit must be at least 1.
func NewFixed(limit int) (*Fixed, error) {
	if limit < 1 {
		return nil, invalidf("fixed limit must be at least 1, got %d", limit)
	}
	return &Fixed{limit: limit}, nil
}

// Update ignores s and returns the fixed limit.
func (f *Fixed) Update(Sample) int { return f.limit }

// Limit returns the fixed limit.
func (f *Fixed) Limit() int { return f.limit }
