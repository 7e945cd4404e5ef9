package index

import (
	"testing"
)

func TestRankKeysParseBack(t *testing.T) {
	for _, tt := range []struct {
		name          string
		sid           string
		seq           int64
		time, created int64
		gen           uint64
	}{
		{"a plain session id reads back", "session-00001", 7, 1700000000000, 1699999999000, 42},
		{"bytes 0x00 and 0x01 in a session id read back", "a\x00b\x01c", 0, -5, -1 << 53, 0},
		{"a one-byte session id with the largest values reads back", "x", 1<<63 - 1, 1<<63 - 1, 1<<63 - 1, 1<<64 - 1},
		{"the empty session id reads back", "", 3, 0, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := []byte(rankKey(tt.time, tt.sid, tt.seq, tt.created, tt.gen))
			sid, seq, err := parseRankKey(k)
			if err != nil || sid != tt.sid || seq != tt.seq {
				t.Fatalf("got %q %d %v; want %q %d", sid, seq, err, tt.sid, tt.seq)
			}
			tm, err := rankKeyTime(k)
			if err != nil || tm != tt.time {
				t.Fatalf("time %d %v; want %d", tm, err, tt.time)
			}
			if c, err := rankKeyCreated(k); err != nil || c != tt.created {
				t.Fatalf("createdAt %d %v; want %d", c, err, tt.created)
			}
			if g, err := rankKeyGen(k); err != nil || g != tt.gen {
				t.Fatalf("generation %d %v; want %d", g, err, tt.gen)
			}
		})
	}
	trailer := "0000000000000000" + "8000000000000000" + "0000000000000001"
	for _, tt := range []struct{ name, key string }{
		{"a short key is an error", "0123"},
		{"a key without its trailer is an error", "0000000000000000ab\x01\x01" + "0000000000000000"},
		{"a key without its terminator is an error", "0000000000000000abc\x01" + trailer},
		{"a key with no escape at all is an error", "0000000000000000abcd" + trailer},
		{"a key whose seq is not hex is an error", "0000000000000000ab\x01\x01zzzzzzzzzzzzzzzz" + trailer[16:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := parseRankKey([]byte(tt.key)); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
