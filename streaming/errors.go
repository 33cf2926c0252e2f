package streaming

import (
	"errors"
	"strings"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

var (
	// ErrInvalidOption is wrapped by the error of a constructor or call
	// given bad input: a nil client, an empty name, a negative duration.
	ErrInvalidOption = errors.New("streaming: invalid option")

	// ErrStreamNotFound is returned by Add and AddBatch with OnlyIfExists
	// when the stream does not exist.
	ErrStreamNotFound = errors.New("streaming: stream does not exist")

	// ErrGroupRecreated is reported (to the logger and the error hook, never
	// returned by a call) when a sink found its consumer group gone and
	// created it again. Entries acknowledged or pending before are then
	// unknown to the new group; entries still in the stream are delivered
	// again.
	ErrGroupRecreated = errors.New("streaming: consumer group recreated")

	// ErrInvalidEvent is returned by Ack and AckBatch for a nil event or
	// one from another stream.
	ErrInvalidEvent = errors.New("streaming: event not from this sink's stream")
)

// isNoGroup reports whether err is Redis's NOGROUP: the stream or the
// consumer group does not exist.
func isNoGroup(err error) bool { return redisutil.HasErrorCode(err, "NOGROUP") }

// isBusyGroup reports whether err is Redis's BUSYGROUP: the group exists.
func isBusyGroup(err error) bool { return redisutil.HasErrorCode(err, "BUSYGROUP") }

func containsFold(s, substr string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(substr))
}
