package record

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dshq/dshq"
)

// headerKeysV2 is the exact key set of a version 2 header record
// (docs/file-format.md#version-2-files, with dshq's inheritedEventCount:
// docs/events-and-surfaces.md#session-headers).
var headerKeysV2 = map[string]bool{
	"type": true, "version": true, "id": true, "createdAt": true, "cwd": true,
	"parentSession": true, "isSeeded": true, "origin": true,
	"delegationDepth": true, "agentPreset": true, "inheritedEventCount": true,
	"harness": true, "machine": true,
}

// MaxMachineBytes bounds a header's machine name.
const MaxMachineBytes = 255

// ValidMachine reports whether s may be a header's machine name: 1 to
// MaxMachineBytes bytes of valid UTF-8 without control characters.
func ValidMachine(s string) bool {
	if s == "" || len(s) > MaxMachineBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return false
		}
	}
	return true
}

// MaxHarnessBytes bounds a header's harness name.
const MaxHarnessBytes = 64

// ValidHarness reports whether s may be a header's harness name: 1 to
// MaxHarnessBytes bytes of lowercase ASCII letters, digits, '-', '_' and
// '.', starting with a letter or digit (dshq.HarnessClaudeCode,
// dshq.HarnessCodex, and names later converters may add).
func ValidHarness(s string) bool {
	if s == "" || len(s) > MaxHarnessBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '-' || c == '_' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// ParseHeader decodes a header record (docs/events-and-surfaces.md#session-headers,
// docs/file-format.md#the-header-line).
//
// Version refusal comes first: an object whose version is a number other
// than 0 or 2 is refused with RuleFormatUnsupported, wrapping
// ErrFormatUnsupported, and a message saying whether a newer or an older
// writer made it. Then the shape and field checks, each failure a
// RuleHeader error naming the field: type "session"; id a valid session id;
// createdAt a non-negative safe integer; cwd, when present, an absolute
// (slash-led) path; parentSession a string; origin absent or "subagent";
// delegationDepth a non-negative safe integer when present (absent reads as
// absent, meaning 0); agentPreset a string; harness, when present, a name
// ValidHarness accepts (absent for a native session); no retired sandboxMode or
// approvalPolicy. Version 0 reads seedLength (isSeeded = present,
// inheritedEventCount = its value) and refuses isSeeded and
// inheritedEventCount; version 2 requires a boolean isSeeded, takes an
// optional inheritedEventCount (0 unless seeded), refuses seedLength and any
// key outside its set. Raw is the record compacted, as received.
func ParseHeader(raw []byte) (dshq.HeaderRecord, error) {
	if len(raw) > DefaultMaxRecordBytes {
		return dshq.HeaderRecord{}, recErr(RuleTooLarge, "header is %d bytes, more than the limit of %d", len(raw), DefaultMaxRecordBytes)
	}
	out, top, err := compactObject(raw)
	if err != nil {
		return dshq.HeaderRecord{}, err
	}
	fields := make(map[string][]byte, len(top))
	for _, m := range top {
		fields[m.key] = out[m.start:m.end]
	}
	version, err := headerVersion(fields["version"])
	if err != nil {
		return dshq.HeaderRecord{}, err
	}
	rec := dshq.HeaderRecord{FormatVersion: version, Raw: out}
	rec.Header.Version = dshq.FormatVersion2
	if err := readCommonHeader(fields, &rec.Header); err != nil {
		return dshq.HeaderRecord{}, err
	}
	if version == dshq.FormatVersion0 {
		err = readSeedV0(fields, &rec)
	} else {
		err = readSeedV2(fields, &rec)
	}
	if err != nil {
		return dshq.HeaderRecord{}, err
	}
	return rec, nil
}

func headerErr(format string, args ...any) *RecordError {
	return recErr(RuleHeader, "first line is not a session header: "+format, args...)
}

// headerVersion checks the version before any shape check
// (docs/file-format.md#the-header-line): a missing or non-numeric version is a
// shape error, a numeric one other than 0 or 2 a format refusal.
func headerVersion(v []byte) (int, error) {
	if v == nil {
		return 0, headerErr("version is missing")
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, headerErr("version %s is not a number", abbreviate(v))
	}
	n, ok := exactInt(v)
	if ok && (n == dshq.FormatVersion0 || n == dshq.FormatVersion2) {
		return int(n), nil
	}
	f, _ := strconv.ParseFloat(string(v), 64)
	direction := "an older harness and there is no upgrade path"
	if f > dshq.FormatVersion2 {
		direction = "a newer harness — upgrade the harness"
	}
	e := recErr(RuleFormatUnsupported, "session format version %s is not supported (this reader reads versions 0 and 2): written by %s", abbreviate(v), direction)
	e.Err = ErrFormatUnsupported
	return 0, e
}

// readCommonHeader checks and reads the fields both versions share.
func readCommonHeader(f map[string][]byte, h *dshq.Header) error {
	if t := f["type"]; string(t) != `"session"` {
		return headerErr(`type is %s, not "session"`, show(t))
	}
	for _, retired := range []string{"sandboxMode", "approvalPolicy"} {
		if f[retired] != nil {
			return headerErr("it holds %s: retired policy baseline fields are not allowed", retired)
		}
	}
	id, err := optString(f, "id")
	if err != nil {
		return err
	}
	if id == nil {
		return headerErr("id is missing")
	}
	if err := ValidateSessionID(*id); err != nil {
		return headerErr("id: %v", err)
	}
	h.ID = *id
	created, err := optCount(f, "createdAt")
	if err != nil {
		return err
	}
	if created == nil {
		return headerErr("createdAt is missing")
	}
	h.CreatedAt = *created
	if h.Cwd, err = optString(f, "cwd"); err != nil {
		return err
	}
	if h.Cwd != nil && !dshq.AbsoluteCwd(*h.Cwd) {
		if strings.Contains(*h.Cwd, "{{cwd}}") {
			return &RecordError{Rule: RulePlaceholder, Msg: "session header cwd " + strconv.Quote(*h.Cwd) + " holds the {{cwd}} placeholder of a test fixture template"}
		}
		return headerErr("cwd must be an absolute path, got %q", *h.Cwd)
	}
	if h.ParentSession, err = optString(f, "parentSession"); err != nil {
		return err
	}
	origin, err := optString(f, "origin")
	if err != nil {
		return err
	}
	if origin != nil && *origin != dshq.OriginSubagent {
		return headerErr(`origin is %q, the only allowed value is "subagent"`, *origin)
	}
	if origin != nil {
		h.Origin = *origin
	}
	if h.DelegationDepth, err = optCount(f, "delegationDepth"); err != nil {
		return err
	}
	if h.AgentPreset, err = optString(f, "agentPreset"); err != nil {
		return err
	}
	harness, err := optString(f, "harness")
	if err != nil {
		return err
	}
	if harness != nil {
		if !ValidHarness(*harness) {
			return headerErr("harness %q is not a harness name (1 to %d bytes of a-z, 0-9, '-', '_', '.')", *harness, MaxHarnessBytes)
		}
		h.Harness = *harness
	}
	machine, err := optString(f, "machine")
	if err != nil {
		return err
	}
	if machine != nil {
		if !ValidMachine(*machine) {
			return headerErr("machine %q is not a machine name (1 to %d bytes of UTF-8 without control characters)", *machine, MaxMachineBytes)
		}
		h.Machine = *machine
	}
	return nil
}

func readSeedV0(f map[string][]byte, rec *dshq.HeaderRecord) error {
	for _, k := range []string{"isSeeded", "inheritedEventCount"} {
		if f[k] != nil {
			return headerErr("%s is a version 2 field in a version 0 header", k)
		}
	}
	seed, err := optCount(f, "seedLength")
	if err != nil {
		return err
	}
	if seed != nil {
		rec.Header.IsSeeded = true
		rec.InheritedEventCount = *seed
	}
	return nil
}

func readSeedV2(f map[string][]byte, rec *dshq.HeaderRecord) error {
	for k := range f {
		if !headerKeysV2[k] {
			return headerErr("version 2 header has unknown key %q", k)
		}
	}
	switch string(f["isSeeded"]) {
	case "true":
		rec.Header.IsSeeded = true
	case "false":
	case "":
		return headerErr("isSeeded is missing (required in version 2)")
	default:
		return headerErr("isSeeded is %s, not a boolean", show(f["isSeeded"]))
	}
	n, err := optCount(f, "inheritedEventCount")
	if err != nil {
		return err
	}
	if n != nil {
		if *n > 0 && !rec.Header.IsSeeded {
			return headerErr("inheritedEventCount is %d but isSeeded is false", *n)
		}
		rec.InheritedEventCount = *n
	}
	return nil
}

// optString reads an optional string field; present and not a string is an
// error.
func optString(f map[string][]byte, key string) (*string, error) {
	v := f[key]
	if v == nil {
		return nil, nil
	}
	s, err := stringValue(v, key)
	if err != nil {
		return nil, headerErr("%s is %s, not a string", key, show(v))
	}
	return &s, nil
}

// optCount reads an optional non-negative safe integer field.
func optCount(f map[string][]byte, key string) (*int64, error) {
	v := f[key]
	if v == nil {
		return nil, nil
	}
	n, ok := exactInt(v)
	if !ok || n < 0 {
		return nil, headerErr("%s is %s, not a non-negative safe integer", key, show(v))
	}
	return &n, nil
}

// show renders a raw value for a message.
func show(v []byte) string {
	if v == nil {
		return "missing"
	}
	return abbreviate(v)
}

// EncodeHeader returns the version 2 wire header record of rec
// (docs/protocol.md#2-the-session-log-stream) in the writer's field order:
// type, version, id, createdAt, cwd?, parentSession?, isSeeded, origin?,
// delegationDepth?, agentPreset?, harness?, then inheritedEventCount when the
// session is seeded. It refuses (RuleHeader) a header that ParseHeader would
// refuse, or an inherited count without isSeeded. rec.Raw and rec.FormatVersion
// are ignored: to reproduce a record as received, write rec.Raw.
func EncodeHeader(rec dshq.HeaderRecord) ([]byte, error) {
	h := rec.Header
	if h.Version != 0 && h.Version != dshq.FormatVersion2 {
		return nil, recErr(RuleHeader, "header version %d: only version 2 headers are written", h.Version)
	}
	for _, v := range []*string{&h.ID, h.Cwd, h.ParentSession, &h.Origin, h.AgentPreset} {
		if v != nil && !utf8.ValidString(*v) {
			return nil, recErr(RuleInvalidUTF8, "header field %q is not valid UTF-8", *v)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"session","version":2,"id":`)
	appendString(&b, h.ID)
	b.WriteString(`,"createdAt":`)
	b.WriteString(strconv.FormatInt(h.CreatedAt, 10))
	optField(&b, "cwd", h.Cwd)
	optField(&b, "parentSession", h.ParentSession)
	b.WriteString(`,"isSeeded":`)
	b.WriteString(strconv.FormatBool(h.IsSeeded))
	if h.Origin != "" {
		optField(&b, "origin", &h.Origin)
	}
	if h.DelegationDepth != nil {
		b.WriteString(`,"delegationDepth":`)
		b.WriteString(strconv.FormatInt(*h.DelegationDepth, 10))
	}
	optField(&b, "agentPreset", h.AgentPreset)
	if h.Harness != "" {
		optField(&b, "harness", &h.Harness)
	}
	if h.Machine != "" {
		optField(&b, "machine", &h.Machine)
	}
	if h.IsSeeded {
		b.WriteString(`,"inheritedEventCount":`)
		b.WriteString(strconv.FormatInt(rec.InheritedEventCount, 10))
	} else if rec.InheritedEventCount != 0 {
		return nil, recErr(RuleHeader, "inheritedEventCount is %d but isSeeded is false", rec.InheritedEventCount)
	}
	b.WriteByte('}')
	if _, err := ParseHeader(b.Bytes()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func optField(b *bytes.Buffer, key string, v *string) {
	if v == nil {
		return
	}
	b.WriteString(`,"` + key + `":`)
	appendString(b, *v)
}
