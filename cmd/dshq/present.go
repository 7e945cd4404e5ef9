package main

import (
	"encoding/json"
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
// thinking, a converted harness record's subtype.
func preview(e dshq.Event) string {
	if t := fold.Text(e); strings.TrimSpace(t) != "" {
		if w := who(e); !strings.HasPrefix(strings.ToLower(t), strings.TrimSpace(w)) {
			return w + t
		}
		return t
	}
	if p := harnessPreview(e); p != "" {
		return p
	}
	switch e.Type {
	case "assistant/chunk":
		var d struct {
			Chunk struct {
				Type           string `json:"type"`
				Text           string `json:"text"`
				Name           string `json:"name"`
				ArgumentsDelta string `json:"argumentsDelta"`
				BlockType      string `json:"blockType"`
				Block          struct {
					Type string `json:"type"`
					Text string `json:"text"`
					Name string `json:"name"`
				} `json:"block"`
			} `json:"chunk"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return ""
		}
		c := d.Chunk
		switch c.Type {
		case "text-delta", "reasoning-delta":
			return c.Type + " " + strconv.Quote(c.Text)
		case "tool-call-delta":
			return words(c.Type, c.Name, strconv.Quote(c.ArgumentsDelta))
		case "block-start":
			return words(c.Type, c.BlockType)
		case "block-end":
			return words(c.Type, c.Block.Type, c.Block.Name, c.Block.Text)
		}
		return c.Type
	case "session/title":
		var d struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			return d.Title
		}
	}
	return ""
}

// message is what preview reads of a message event: its source and the
// kinds of its content.
type message struct {
	Source struct {
		Kind   string `json:"kind"`
		Plugin string `json:"plugin"`
	} `json:"source"`
	Content []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	} `json:"content"`
}

// messageOf decodes the message of a user/message (its data) or of an
// assistant/message or tool/result (data.message).
func messageOf(e dshq.Event) (message, bool) {
	var m message
	switch e.Type {
	case dshq.TypeUserMessage:
		return m, json.Unmarshal(e.Data, &m) == nil
	case "assistant/message", "tool/result":
		var d struct {
			Message message `json:"message"`
		}
		ok := json.Unmarshal(e.Data, &d) == nil
		return d.Message, ok
	}
	return m, false
}

// who is the prefix naming where a text came from when the event type
// does not: a plugin's message (a compaction summary), a tool result that
// is an error.
func who(e dshq.Event) string {
	m, ok := messageOf(e)
	if !ok {
		return ""
	}
	for _, c := range m.Content {
		if c.Type == "tool-result" && c.IsError {
			return "error: "
		}
	}
	if m.Source.Kind == "plugin" && m.Source.Plugin != "" {
		return "[" + m.Source.Plugin + "] "
	}
	return ""
}

// harnessPreview is what read shows for an event without semantic text: a
// model message's thinking ("thinking: …", kept but never searchable), a
// message with only blank text, a converted harness record's subtype and
// role (claude-code/progress hook_progress).
func harnessPreview(e dshq.Event) string {
	if m, ok := messageOf(e); ok {
		for _, c := range m.Content {
			if c.Type == "reasoning" && strings.TrimSpace(c.Text) != "" {
				return "thinking: " + c.Text
			}
		}
		if len(m.Content) > 0 {
			return "(blank)"
		}
		return ""
	}
	if !strings.HasPrefix(e.Type, dshq.HarnessClaudeCode+"/") && !strings.HasPrefix(e.Type, dshq.HarnessCodex+"/") {
		return ""
	}
	var d struct {
		Subtype  string `json:"subtype"`
		Role     string `json:"role"`
		Error    string `json:"error"`
		RoutedTo string `json:"routedTo"`
		CopyOf   *int64 `json:"copyOf"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return ""
	}
	out := words(d.Subtype, d.Role, d.Error)
	if d.RoutedTo != "" {
		out = words(out, "→ "+d.RoutedTo)
	}
	if d.CopyOf != nil {
		out = words(out, fmt.Sprintf("(copy of %d)", *d.CopyOf))
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
