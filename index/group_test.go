package index

import (
	"testing"
)

func TestRankKeysParseBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		sid  string
		seq  int64
		time int64
	}{
		{"a plain session id reads back", "session-00001", 7, 1700000000000},
		{"bytes 0x00 and 0x01 in a session id read back", "a\x00b\x01c", 0, -5},
		{"a one-byte session id with the largest seq reads back", "x", 1<<63 - 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sid, seq, err := parseRankKey([]byte(rankKey(tt.time, tt.sid, tt.seq)))
			if err != nil || sid != tt.sid || seq != tt.seq {
				t.Fatalf("got %q %d %v; want %q %d", sid, seq, err, tt.sid, tt.seq)
			}
		})
	}
	for _, tt := range []struct{ name, key string }{
		{"a short key is an error", "0123"},
		{"a key without its terminator is an error", "0000000000000000abc\x01" + "0000000000000000"},
		{"a key with no escape at all is an error", "0000000000000000abcd0000000000000000"},
		{"a key whose seq is not hex is an error", "0000000000000000ab\x01\x01zzzzzzzzzzzzzzzz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := parseRankKey([]byte(tt.key)); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
