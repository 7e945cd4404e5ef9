package record

import (
	"bytes"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way JavaScript's JSON.stringify
// does: only '"', '\\' and control characters below U+0020 are escaped (the
// short forms where JSON has them, else \u00xx); '<', '>', '&', U+2028 and
// U+2029 are written raw. Invalid UTF-8 is written as U+FFFD; callers that
// must be lossless validate first (ParseHeader does).
func appendString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xF])
		default:
			var buf [utf8.UTFMax]byte
			n := utf8.EncodeRune(buf[:], r)
			b.Write(buf[:n])
		}
	}
	b.WriteByte('"')
}
