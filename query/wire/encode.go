package wire

import (
	"bytes"
	"encoding/json"
)

// ReplyHeadroom is the part of a connection's max payload a reply body
// leaves free for headers and framing.
const ReplyHeadroom = 8 << 10

// EncodeReply encodes a reply as JSON without escaping <, > and &: a reply
// is not HTML, and the escapes would grow a raw event that holds them (up
// to six times) and change its bytes from those written. An event's raw
// record is therefore carried byte for byte. The projection's shard and a
// partitioned service's merges encode with it alike.
func EncodeReply(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EncodedLen is the length of v's EncodeReply.
func EncodedLen(v any) int {
	b, _ := EncodeReply(v)
	return len(b)
}
