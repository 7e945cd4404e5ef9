package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
)

// preview is the text read shows for an event: its semantic text (what
// search finds), with who it came from where the type does not say it (a
// compaction summary, a failed tool result); else what the rows that have
// none carry: a chunk's delta or block, a title, a model message's
// thinking, a converted harness record's subtype. It reads the data as
// fold.Data, the reading the fold and the web UI share.
func preview(e dshq.Event) string {
	d := fold.DecodeData(e.Data)
	if t := fold.Text(e); strings.TrimSpace(t) != "" {
		if w := who(e.Type, d); !strings.HasPrefix(strings.ToLower(t), strings.TrimSpace(w)) {
			return w + t
		}
		return t
	}
	if p := harnessPreview(e.Type, d); p != "" {
		return p
	}
	switch e.Type {
	case "assistant/chunk":
		return chunkPreview(d.Object("chunk"))
	case "session/title":
		return d.String("title")
	}
	return ""
}

// chunkPreview is what read shows for a piece of a streamed model message.
func chunkPreview(c fold.Data) string {
	switch typ := c.String("type"); typ {
	case "text-delta", "reasoning-delta":
		return typ + " " + strconv.Quote(c.String("text"))
	case "tool-call-delta":
		return words(typ, c.String("name"), strconv.Quote(c.String("argumentsDelta")))
	case "block-start":
		return words(typ, c.String("blockType"))
	case "block-end":
		b := c.Object("block")
		return words(typ, b.String("type"), b.String("name"), b.String("text"))
	default:
		return typ
	}
}

// isMessage reports whether events of type t carry a message.
func isMessage(t string) bool {
	return t == dshq.TypeUserMessage || t == dshq.TypeAssistantMessage || t == dshq.TypeToolResult
}

// who is the prefix naming where a text came from when the event type
// does not: a plugin's message (a compaction summary), a tool result that
// is an error.
func who(eventType string, d fold.Data) string {
	if !isMessage(eventType) {
		return ""
	}
	m := d.Message(eventType)
	for _, b := range m.Blocks("content") {
		if b.Type == "tool-result" && b.IsError {
			return "error: "
		}
	}
	if src := m.Source(); src.String("kind") == "plugin" && src.String("plugin") != "" {
		return "[" + src.String("plugin") + "] "
	}
	return ""
}

// harnessPreview is what read shows for an event without semantic text: a
// model message's thinking ("thinking: …", kept but never searchable), a
// message with only blank text, a converted harness record's subtype and
// role (claude-code/progress hook_progress).
func harnessPreview(eventType string, d fold.Data) string {
	if isMessage(eventType) {
		blocks := d.Message(eventType).Blocks("content")
		for _, b := range blocks {
			if b.Type == "reasoning" && strings.TrimSpace(b.Text) != "" {
				return "thinking: " + b.Text
			}
		}
		if len(blocks) > 0 {
			return "(blank)"
		}
		return ""
	}
	if !strings.HasPrefix(eventType, dshq.HarnessClaudeCode+"/") && !strings.HasPrefix(eventType, dshq.HarnessCodex+"/") {
		return ""
	}
	out := words(d.String("subtype"), d.String("role"), d.String("error"))
	if to := d.String("routedTo"); to != "" {
		out = words(out, "→ "+to)
	}
	if d.Value("copyOf") != nil {
		out = words(out, fmt.Sprintf("(copy of %d)", d.Int("copyOf")))
	}
	return out
}

// newTable returns an aligned table writer.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// isoTime renders epoch milliseconds as UTC ISO-8601 with milliseconds.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// flat puts text on one line (tabs and newlines become spaces) and cuts it
// to max runes with an ellipsis (max 0 = no cut).
func flat(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// words joins the non-empty ws with spaces.
func words(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// count is "1 session", "2 sessions": n and noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// seqList renders seqs as "1, 2, 3" or "—".
func seqList(seqs []int64) string {
	if len(seqs) == 0 {
		return "—"
	}
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}
