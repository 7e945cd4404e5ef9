package tools

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
)

// timestampRE is the accepted ISO 8601 form (docs/tools.md#timestamps): date,
// uppercase T, hours and minutes, optional seconds with any number of fraction
// digits, and a mandatory zone (uppercase Z or ±HH:MM).
var timestampRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})$`)

// instant is a parsed timestamp: whole epoch milliseconds (the fraction
// truncated to three digits) and the further fraction digits, trailing zeros
// removed. Compared exactly, with integer arithmetic only.
type instant struct {
	ms   int64
	rest string
}

// lower is the inclusive integer-ms lower bound the instant sets: ms, or the
// next millisecond when the instant lies strictly after ms.
func (t instant) lower() int64 {
	if t.rest != "" {
		return t.ms + 1
	}
	return t.ms
}

// upper is the inclusive integer-ms upper bound the instant sets.
func (t instant) upper() int64 { return t.ms }

// after reports whether t is strictly later than u.
func (t instant) after(u instant) bool {
	if t.ms != u.ms {
		return t.ms > u.ms
	}
	// Equal-length digit strings compare like the fractions they denote.
	a, b := t.rest, u.rest
	for len(a) < len(b) {
		a += "0"
	}
	for len(b) < len(a) {
		b += "0"
	}
	return a > b
}

// parseTimestamp parses s or reports false. Field ranges: month 1–12, day
// valid for the month (proleptic Gregorian), hour ≤ 23, minute and second ≤
// 59, offset hour ≤ 23 and minute ≤ 59; the instant must be a safe integer
// of milliseconds.
func parseTimestamp(s string) (instant, bool) {
	m := timestampRE.FindStringSubmatch(s)
	if m == nil {
		return instant{}, false
	}
	n := func(x string) int64 { v, _ := strconv.ParseInt(x, 10, 64); return v }
	year, month, day := n(m[1]), n(m[2]), n(m[3])
	hour, minute, second := n(m[4]), n(m[5]), n(m[6])
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) ||
		hour > 23 || minute > 59 || second > 59 {
		return instant{}, false
	}
	var offset int64
	if zone := m[8]; zone != "Z" {
		oh, om := n(zone[1:3]), n(zone[4:6])
		if oh > 23 || om > 59 {
			return instant{}, false
		}
		offset = oh*60 + om
		if zone[0] == '-' {
			offset = -offset
		}
	}
	frac := m[7]
	head := (frac + "000")[:3]
	rest := ""
	if len(frac) > 3 {
		rest = strings.TrimRight(frac[3:], "0")
	}
	minutes := daysFromCivil(year, month, day)*1440 + hour*60 + minute - offset
	ms := (minutes*60+second)*1000 + n(head)
	if ms > maxSafe || ms < -maxSafe {
		return instant{}, false
	}
	return instant{ms: ms, rest: rest}, true
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns days since 1970-01-01 of a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// timeRange validates an optional from/to timestamp pair (stage 2) and
// returns the filter it sets: inclusive integer-ms bounds. empty is true when
// the bounds admit no integer millisecond (both inside one millisecond).
// Failures are SESSION_QUERY_INVALID_FILTER.
func (a args) timeRange(kind, fromName, toName, what string) (f *dshq.Filter, empty bool, err error) {
	var from, to *instant
	for _, x := range []struct {
		name string
		dst  **instant
	}{{fromName, &from}, {toName, &to}} {
		s, ok := a.str(x.name)
		if !ok {
			continue
		}
		t, ok := parseTimestamp(s)
		if !ok {
			return nil, false, dshq.Errorf(dshq.CodeInvalidFilter,
				"%s must be an ISO 8601 timestamp with a time zone, such as 2026-08-29T10:40:00Z or 2026-08-29T18:40:00.123+08:00", x.name)
		}
		*x.dst = &t
	}
	if from == nil && to == nil {
		return nil, false, nil
	}
	if from != nil && to != nil && from.after(*to) {
		return nil, false, dshq.Errorf(dshq.CodeInvalidFilter, "%s range from must be less than or equal to to", what)
	}
	f = &dshq.Filter{Kind: kind}
	if from != nil {
		v := float64(from.lower())
		f.From = &v
	}
	if to != nil {
		v := float64(to.upper())
		f.To = &v
	}
	if f.From != nil && f.To != nil && *f.From > *f.To {
		return f, true, nil
	}
	return f, false, nil
}
