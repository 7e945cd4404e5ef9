package tools

import (
	"encoding/json"
	"testing"
)

func TestParseTimestamp(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
		ms   int64
		rest string
	}{
		{"the epoch in Z parses", "1970-01-01T00:00:00Z", true, 0, ""},
		{"seconds are optional", "1970-01-01T00:01Z", true, 60000, ""},
		{"milliseconds add to the instant", "1970-01-01T00:00:00.123Z", true, 123, ""},
		{"one fraction digit is tenths", "1970-01-01T00:00:00.1Z", true, 100, ""},
		{"digits beyond milliseconds are kept apart", "1970-01-01T00:00:00.12300001Z", true, 123, "00001"},
		{"trailing zeros beyond milliseconds are dropped", "1970-01-01T00:00:00.1230000Z", true, 123, ""},
		{"a positive offset is subtracted", "1970-01-01T08:00:00.1239999+08:00", true, 123, "9999"},
		{"a negative offset is added", "1969-12-31T23:00:00-01:00", true, 0, ""},
		{"instants before the epoch are negative", "1969-12-31T23:59:59.999Z", true, -1, ""},
		{"a leap day of a leap year parses", "2024-02-29T00:00:00Z", true, 1709164800000, ""},
		{"a leap day of a 400-year parses", "2000-02-29T00:00:00Z", true, 951782400000, ""},
		{"the example's creation time parses", "2026-08-29T10:40:00.000Z", true, 1788000000000, ""},
		{"a missing zone is refused", "2026-08-29T10:40:00", false, 0, ""},
		{"February 30 is refused", "2026-02-30T00:00:00Z", false, 0, ""},
		{"February 29 of a century year is refused", "2100-02-29T00:00:00Z", false, 0, ""},
		{"hour 24 is refused", "2026-08-29T24:00:00Z", false, 0, ""},
		{"minute 60 is refused", "2026-08-29T10:60:00Z", false, 0, ""},
		{"second 60 is refused", "2026-08-29T10:40:60Z", false, 0, ""},
		{"offset hour 24 is refused", "2026-08-29T10:40:00+24:00", false, 0, ""},
		{"offset minute 60 is refused", "2026-08-29T10:40:00+00:60", false, 0, ""},
		{"a lowercase t is refused", "2026-08-29t10:40:00Z", false, 0, ""},
		{"a lowercase z is refused", "2026-08-29T10:40:00z", false, 0, ""},
		{"month 13 is refused", "2026-13-01T00:00:00Z", false, 0, ""},
		{"day 0 is refused", "2026-01-00T00:00:00Z", false, 0, ""},
		{"a fraction without seconds is refused", "2026-01-01T00:00.5Z", false, 0, ""},
		{"an empty fraction is refused", "2026-01-01T00:00:00.Z", false, 0, ""},
		{"non-ASCII digits are refused", "２026-01-01T00:00:00Z", false, 0, ""},
		{"a date alone is refused", "2026-01-01", false, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseTimestamp(tc.in)
			if ok != tc.ok || (ok && (got.ms != tc.ms || got.rest != tc.rest)) {
				t.Fatalf("parseTimestamp(%q) = %+v, %v; want ms=%d rest=%q ok=%v", tc.in, got, ok, tc.ms, tc.rest, tc.ok)
			}
		})
	}
}

func TestInstantBoundsAndOrder(t *testing.T) {
	p := func(s string) instant {
		i, ok := parseTimestamp(s)
		if !ok {
			t.Fatalf("parse %q", s)
		}
		return i
	}
	t.Run("sub-millisecond bounds fall strictly between two milliseconds", func(t *testing.T) {
		lo, hi := p("1970-01-01T00:00:00.12300001Z"), p("1970-01-01T08:00:00.1239999+08:00")
		if lo.lower() != 124 || hi.upper() != 123 {
			t.Fatalf("lower=%d upper=%d", lo.lower(), hi.upper())
		}
	})
	t.Run("a whole millisecond bounds itself on both sides", func(t *testing.T) {
		x := p("1970-01-01T00:00:00.123Z")
		if x.lower() != 123 || x.upper() != 123 {
			t.Fatalf("lower=%d upper=%d", x.lower(), x.upper())
		}
	})
	for _, tc := range []struct {
		name, a, b string
		after      bool
	}{
		{"a later sub-millisecond digit is after", "1970-01-01T00:00:00.1239Z", "1970-01-01T00:00:00.1231Z", true},
		{".12311 is after .1231 with implicit zeros", "1970-01-01T00:00:00.12311Z", "1970-01-01T00:00:00.1231Z", true},
		{".1231 is not after .12311", "1970-01-01T00:00:00.1231Z", "1970-01-01T00:00:00.12311Z", false},
		{".100 equals .1", "1970-01-01T00:00:00.100Z", "1970-01-01T00:00:00.1Z", false},
		{".1 equals .100", "1970-01-01T00:00:00.1Z", "1970-01-01T00:00:00.100Z", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p(tc.a).after(p(tc.b)); got != tc.after {
				t.Fatalf("after = %v", got)
			}
		})
	}
}

func TestJSONInteger(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		want string
	}{
		{"0", true, "0"}, {"7", true, "7"}, {"-1", true, "-1"}, {"1.0", true, "1"}, {"1e3", true, "1000"},
		{"1.5", false, ""}, {"0.5e1", true, "5"}, {"1e-1", false, ""}, {"9007199254740993", true, "9007199254740993"},
		{"1e400", true, "100000000000000000000"}, {"1e99999999999999999999", true, "100000000000000000000"},
		{"1e-99999999999999999999", false, ""}, {"0e99999999999999999999", true, "0"},
		{`"5"`, false, ""}, {"true", false, ""}, {"null", false, ""}, {"[1]", false, ""},
	} {
		t.Run("the JSON value "+tc.in, func(t *testing.T) {
			got, ok := jsonInteger(json.RawMessage(tc.in))
			if ok != tc.ok || (ok && got.String() != tc.want) {
				t.Fatalf("jsonInteger(%s) = %v, %v", tc.in, got, ok)
			}
		})
	}
}
