package build

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzAppendStringRoundTrips(f *testing.F) {
	for _, s := range []string{"", "plain", "\"quoted\" \\ back", "\x00\x01\x1f\x7f", "é中🎉\u2028\u2029", "\r\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		b := appendString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Fatalf("%q encodes as %s, which reads back as %q (%v)", s, b, back, err)
		}
		if len(b)-2 != escapedLen(s) {
			t.Fatalf("escapedLen(%q) = %d, encoded %d", s, escapedLen(s), len(b)-2)
		}
	})
}

func FuzzSplitEscapedKeepsEveryByteWithinTheBudgets(f *testing.F) {
	f.Add("ab\x01cd\"ef中文🎉", 7, 24)
	f.Add("", 0, 24)
	f.Add(strings.Repeat("\x01", 40), 0, 30)
	f.Fuzz(func(t *testing.T, s string, first, rest int) {
		s = strings.ToValidUTF8(s, "?")
		first, rest = max(first%64, 0), 24+max(rest%64, 0)
		pieces := splitEscaped(s, first, rest)
		if strings.Join(pieces, "") != s {
			t.Fatalf("pieces %q do not join to %q", pieces, s)
		}
		for i, p := range pieces {
			budget := rest
			if i == 0 {
				budget = first
			}
			if escapedLen(p) > budget || !utf8.ValidString(p) {
				t.Fatalf("piece %d %q: escaped %d over %d, or not UTF-8", i, p, escapedLen(p), budget)
			}
			if i > 0 && p == "" {
				t.Fatalf("piece %d is empty", i)
			}
		}
	})
}

func TestCapStringsCutsOnlyLongStringsAndLeavesTheInputAlone(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	in := O("id", "short", "content", Arr{O("type", "text", "text", long)})
	out := capStrings(in, 300, -1)
	if got := out[1].V.(Arr)[0].(Obj)[1].V.(string); len(got) > 300 || !utf8.ValidString(got) {
		t.Fatalf("cut to %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if out[0].V != "short" || in[1].V.(Arr)[0].(Obj)[1].V != long {
		t.Fatalf("capStrings changed a short string or its input")
	}
}
