package pool

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// WithMeterProvider makes the node report its metrics (see Metrics in the
// package documentation) through mp, an OpenTelemetry MeterProvider such as
// the SDK's wired to a Prometheus or OTLP exporter. Defaults to no metrics:
// the instruments are no-ops and cost nothing. With a provider, the node
// also samples the queue depth and the number of workers once per janitor
// tick (one pipelined Redis round trip, at most every 250ms) and reads
// them again at each collection.
func WithMeterProvider(mp metric.MeterProvider) NodeOption {
	return func(c *nodeConfig) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", ErrInvalidOption)
		}
		c.meterProvider = mp
		return nil
	}
}
