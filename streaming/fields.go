package streaming

// Field names of an entry in Redis, for Lua scripts that add entries which
// a Sink or Reader must understand (XADD key * FieldEvent e FieldTopic t
// FieldPayload p).
const (
	FieldEvent   = fieldEvent
	FieldTopic   = fieldTopic
	FieldPayload = fieldPayload
)
