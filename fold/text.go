package fold

import (
	"strings"
	"unicode/utf8"

	"github.com/dshq/dshq"
)

// Text returns an event's semantic text (docs/search.md#semantic-text): what is
// indexed and searched. "" means the event has no search document. Data that
// cannot be decoded has no text.
func Text(e dshq.Event) string {
	switch e.Type {
	case dshq.TypeUserMessage, dshq.TypeAssistantMessage, dshq.TypeToolResult,
		"tool/call", "todo/write", "turn/end":
	default:
		return ""
	}
	data, err := decodeAny(e.Data)
	if err != nil {
		return ""
	}
	return SemanticText(e.Type, data)
}

// SemanticText is Text for data already decoded into Go's generic JSON form
// (map[string]any, []any, string, float64, bool, nil). Parts are trimmed as
// JavaScript's String.prototype.trim does, empty parts dropped and the rest
// joined with "\n":
//
//   - user/message: the text of its content blocks;
//   - assistant/message, tool/result: the text of data.message.content (or
//     of data.content in the older shape without data.message), then for a
//     tool/result error.name and error.code;
//   - tool/call: name, arguments;
//   - todo/write: each todo's status and content;
//   - turn/end: "error" and the error's message, "aborted", "max-tokens" or
//     "interrupted" by reason kind ("" for completed, blocked and others);
//   - every other type, known or not: "".
//
// Blocks: text gives its text, tool-call its name and arguments, tool-result
// its inner blocks (recursively); reasoning, image and unknown blocks give
// nothing — reasoning is never searchable.
func SemanticText(eventType string, data any) string {
	d := dataOf(data)
	return semanticText(eventType, d, d.Message(eventType))
}

// semanticText is SemanticText of data d whose message is msg (Apply reads
// it once for the text and the crash closers).
func semanticText(eventType string, d, msg Data) string {
	var parts []string
	switch eventType {
	case dshq.TypeUserMessage, dshq.TypeAssistantMessage:
		parts = blockParts(parts, msg.m["content"])
	case dshq.TypeToolResult:
		parts = blockParts(parts, msg.m["content"])
		errObj := d.Object("error")
		parts = appendStrings(parts, errObj.String("name"), errObj.String("code"))
	case "tool/call":
		parts = appendStrings(parts, d.String("name"), d.String("arguments"))
	case "todo/write":
		todos, _ := d.List("todos")
		for _, t := range todos {
			parts = appendStrings(parts, t.String("status"), t.String("content"))
		}
	case "turn/end":
		parts = turnEndParts(parts, d.Object("reason"))
	}
	return strings.Join(parts, "\n")
}

func turnEndParts(parts []string, reason Data) []string {
	switch kind := reason.String("kind"); kind {
	case "error":
		return appendStrings(parts, "error", reason.Object("error").String("message"))
	case "aborted", "max-tokens", "interrupted":
		return append(parts, kind)
	}
	return parts
}

// blockParts appends the text parts of a content list.
func blockParts(parts []string, list any) []string {
	eachBlock(list, func(b Block) {
		switch b.Type {
		case "text":
			parts = appendStrings(parts, b.Text)
		case "tool-call":
			parts = appendStrings(parts, b.Name, b.Arguments)
		case "tool-result":
			parts = blockParts(parts, b.content)
		}
	})
	return parts
}

// appendStrings appends each value that is not blank after trimming.
func appendStrings(parts []string, values ...string) []string {
	for _, s := range values {
		if s = jsTrim(s); s != "" {
			parts = append(parts, s)
		}
	}
	return parts
}

// jsTrim trims what JavaScript's String.prototype.trim trims: WhiteSpace
// and LineTerminator code points (which differ from unicode.IsSpace: U+FEFF
// is trimmed, U+0085 is not).
func jsTrim(s string) string {
	return strings.TrimFunc(s, isJSSpace)
}

func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	case utf8.RuneError:
		return false
	}
	return r >= 0x2000 && r <= 0x200A
}
