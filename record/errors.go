package record

import (
	"errors"
	"fmt"
)

// Rule names the check a record failed. Rules are stable strings that tests,
// logs and quarantine reasons can match on.
type Rule string

// The rules of the codec.
const (
	// RuleTooLarge: a record longer than the reader's record limit.
	RuleTooLarge Rule = "too-large"
	// RuleInvalidJSON: bytes that are not one JSON value (including an
	// empty line).
	RuleInvalidJSON Rule = "invalid-json"
	// RuleInvalidUTF8: a string holding bytes that are not UTF-8.
	RuleInvalidUTF8 Rule = "invalid-utf8"
	// RuleDuplicateKey: an object with the same key twice; it cannot round
	// trip.
	RuleDuplicateKey Rule = "duplicate-key"
	// RuleTooDeep: arrays and objects nested deeper than MaxDepth.
	RuleTooDeep Rule = "too-deep"
	// RuleNegativeZero: a number whose value is -0 (not lossless JSON).
	RuleNegativeZero Rule = "negative-zero"
	// RuleNumberRange: a number beyond the range of a double, or a seq or
	// time that is not a safe integer.
	RuleNumberRange Rule = "number-range"
	// RuleNotObject: a record that is not a JSON object.
	RuleNotObject Rule = "not-object"
	// RuleEnvelope: an event record without a string type, an integer seq
	// and time, or data.
	RuleEnvelope Rule = "envelope"
	// RuleHeader: a header record that fails the shape or field checks.
	RuleHeader Rule = "header"
	// RuleFormatUnsupported: a header whose numeric version this reader
	// does not read. It wraps ErrFormatUnsupported.
	RuleFormatUnsupported Rule = "format-unsupported"
	// RuleMissingHeader: an empty file, or a first line that does not end.
	RuleMissingHeader Rule = "missing-header"
	// RuleMalformedRow: a packed chunk row that fails its validation
	// (docs/file-format.md#row-validation).
	RuleMalformedRow Rule = "malformed-row"
	// RuleSeqGap: an event whose seq is not the next one.
	RuleSeqGap Rule = "seq-gap"
	// RuleTornTail: final bytes without a newline, or a torn zstd frame.
	RuleTornTail Rule = "torn-tail"
	// RuleZstd: a zstd stream that does not decompress.
	RuleZstd Rule = "zstd"
	// RulePlaceholder: a header that still holds a template placeholder: a
	// relative "{{cwd}}" cwd always, any "{{name}}" in id, parentSession
	// or cwd with WithoutPlaceholders.
	RulePlaceholder Rule = "placeholder"
	// RuleInvalidEvent: an event that cannot be written (Writer input).
	RuleInvalidEvent Rule = "invalid-event"
)

// ErrFormatUnsupported is wrapped by a refusal of a header version this
// reader does not read (the original's SessionFormatUnsupportedError,
// docs/sdk.md#errors): a format refusal, not corruption.
var ErrFormatUnsupported = errors.New("session format unsupported")

// RecordError is the error of every decoding failure in this package: the
// rule that failed, where, and a message that names what is wrong.
type RecordError struct {
	// File names the input when the caller gave one (WithName), else "".
	File string
	// Line is the 1-based physical line of a JSONL file (the header is
	// line 1); 0 when the record did not come from a file.
	Line int
	// Rule is the check that failed.
	Rule Rule
	// Msg says what is wrong.
	Msg string
	// Err is an underlying cause or sentinel, or nil.
	Err error
}

// Error returns "file: line N: rule: message", leaving out what is unknown.
func (e *RecordError) Error() string {
	s := ""
	if e.File != "" {
		s = e.File + ": "
	}
	if e.Line > 0 {
		s += fmt.Sprintf("line %d: ", e.Line)
	}
	return s + string(e.Rule) + ": " + e.Msg
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

func recErr(rule Rule, format string, args ...any) *RecordError {
	return &RecordError{Rule: rule, Msg: fmt.Sprintf(format, args...)}
}

// RuleOf returns the Rule of the first *RecordError in err's chain, or "".
func RuleOf(err error) Rule {
	var e *RecordError
	if errors.As(err, &e) {
		return e.Rule
	}
	return ""
}
