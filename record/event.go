package record

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/dshq/dshq"
)

// MaxSafeInteger is 2^53-1, the largest integer every JSON reader holds
// exactly (JavaScript's Number.MAX_SAFE_INTEGER).
const MaxSafeInteger = 1<<53 - 1

// ParseEvent decodes one event record
// (docs/events-and-surfaces.md#the-event-envelope): a JSON object with a string
// type, safe-integer seq and time, and data; surfaceOp and sourceEventSeqs are
// kept raw, ignorable is true only for the literal true. Raw is the record
// compacted (insignificant whitespace removed, every token kept byte for byte,
// key order kept); it never aliases raw.
//
// Besides what the envelope needs, ParseEvent refuses what cannot round trip
// losslessly: invalid JSON or UTF-8, duplicate keys, -0, numbers beyond a
// double, nesting deeper than MaxDepth, records over DefaultMaxRecordBytes.
// Which other keys an envelope may have, and the surface rules, are the
// fold's to check. Every error is a *RecordError.
func ParseEvent(raw []byte) (dshq.Event, error) {
	if len(raw) > DefaultMaxRecordBytes {
		return dshq.Event{}, recErr(RuleTooLarge, "record is %d bytes, more than the limit of %d", len(raw), DefaultMaxRecordBytes)
	}
	out, top, err := compactObject(raw)
	if err != nil {
		return dshq.Event{}, err
	}
	return eventFromMembers(out, top)
}

// eventFromMembers reads the envelope of a compacted object.
func eventFromMembers(out []byte, top []member) (dshq.Event, error) {
	ev := dshq.Event{Raw: out}
	var haveType, haveSeq, haveTime bool
	for _, m := range top {
		v := out[m.start:m.end]
		var err error
		switch m.key {
		case "type":
			ev.Type, err = stringValue(v, "type")
			haveType = true
		case "seq":
			ev.Seq, err = safeInt(v, "seq", 0)
			haveSeq = true
		case "time":
			ev.Time, err = safeInt(v, "time", -MaxSafeInteger)
			haveTime = true
		case "data":
			ev.Data = v
		case "surfaceOp":
			ev.SurfaceOp = v
		case "sourceEventSeqs":
			ev.SourceEventSeqs = v
		case "ignorable":
			ev.Ignorable = string(v) == "true"
		}
		if err != nil {
			return dshq.Event{}, err
		}
	}
	switch {
	case !haveType:
		return dshq.Event{}, recErr(RuleEnvelope, "event has no type")
	case !haveSeq:
		return dshq.Event{}, recErr(RuleEnvelope, "event of type %q has no seq", ev.Type)
	case !haveTime:
		return dshq.Event{}, recErr(RuleEnvelope, "event %d has no time", ev.Seq)
	case ev.Data == nil:
		return dshq.Event{}, recErr(RuleEnvelope, "event %d has no data", ev.Seq)
	}
	return ev, nil
}

// stringValue decodes a JSON string value.
func stringValue(v []byte, field string) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", recErr(RuleEnvelope, "%s is not a string", field)
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), nil // validated UTF-8, no escapes
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", recErr(RuleEnvelope, "%s: %v", field, err)
	}
	return s, nil
}

// safeInt reads a JSON number that is exactly an integer in [min, 2^53-1].
// An integral value written with a fraction or exponent (1.0, 1e3) is
// accepted, as JSON.parse gives the same number; 1.5 and 1e-1 are not.
func safeInt(v []byte, field string, min int64) (int64, error) {
	n, ok := exactInt(v)
	if !ok {
		return 0, recErr(RuleNumberRange, "%s %s is not a safe integer", field, abbreviate(v))
	}
	if n < min {
		return 0, recErr(RuleNumberRange, "%s %d is below %d", field, n, min)
	}
	return n, nil
}

// exactInt returns the integer a JSON number literal denotes exactly, when it
// denotes an integer within ±(2^53-1). It does no float arithmetic.
func exactInt(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	var digits []byte // significant digits, leading zeros dropped
	exp := 0          // value = digits × 10^exp
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		if len(digits) > 0 || v[i] != '0' {
			digits = append(digits, v[i])
		}
	}
	if i < len(v) && v[i] == '.' {
		for i++; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			exp--
			if len(digits) > 0 || v[i] != '0' {
				digits = append(digits, v[i])
			}
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		e, err := strconv.ParseInt(string(v[i+1:]), 10, 32)
		if err != nil {
			// An exponent beyond int32 is out of range unless the value is 0.
			if len(digits) == 0 {
				return 0, !neg
			}
			return 0, false
		}
		exp += int(e)
		i = len(v)
	}
	if i != len(v) {
		return 0, false
	}
	for exp < 0 && len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		exp++
	}
	if len(digits) == 0 {
		return 0, !neg
	}
	if exp < 0 || len(digits)+exp > 16 {
		return 0, false
	}
	var n int64
	for _, d := range digits {
		n = n*10 + int64(d-'0')
	}
	for ; exp > 0; exp-- {
		n *= 10
	}
	if n > MaxSafeInteger {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
