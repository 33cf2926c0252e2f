package pool

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Event names in the pool's streams.
const (
	evStart  = "start"
	evStop   = "stop"
	evNotify = "notify"
	evReply  = "reply"
)

// noReply stands for "nobody waits" in a header's reply fields.
const noReply = "-"

// header is the routing information every start, stop and notify event
// carries in its payload: "nonce gen replyNode requestID".
type header struct {
	nonce   string
	gen     int64
	replyTo string // node id, or noReply
	reqID   string // request id, or noReply
}

func (h header) String() string {
	return h.nonce + " " + strconv.FormatInt(h.gen, 10) + " " + h.replyTo + " " + h.reqID
}

// parseHeader splits an event payload into its header and, for notify
// events, the notification payload after the first newline.
func parseHeader(p []byte) (header, []byte, error) {
	line, rest := p, []byte(nil)
	if i := strings.IndexByte(string(p), '\n'); i >= 0 {
		line, rest = p[:i], p[i+1:]
	}
	f := strings.Fields(string(line))
	if len(f) != 4 {
		return header{}, nil, fmt.Errorf("pool: malformed event header %q", line)
	}
	gen, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return header{}, nil, fmt.Errorf("pool: malformed generation in %q", line)
	}
	return header{nonce: f[0], gen: gen, replyTo: f[2], reqID: f[3]}, rest, nil
}

// Reply payloads: a status byte, then details.
const (
	replyOK          = 'o' // done
	replyStartFailed = 's' // "s<worker>\n<message>": Start failed
	replyFailed      = 'e' // "e<message>": Stop or HandleNotification failed
	replyNoJob       = 'n' // the worker does not run the job (it moved); details may follow
	replyStopped     = 'x' // "x<message>": the job ended before its Start succeeded
)

// newID returns a random 16-hex-digit id for nodes, workers, nonces and
// requests.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
