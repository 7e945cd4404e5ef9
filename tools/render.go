package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
	"github.com/dshq/dshq/fold"
)

// Fixed lines of the renderings (docs/tools.md#renderings).
const (
	noSessionMatches = "No prior session matches found."
	noEventMatches   = "No prior event matches found."
	capLine          = "Result cap reached. Narrow the query or add filters to find additional matches."
	noSemanticText   = "(no semantic text)"
)

// isoTime renders epoch milliseconds as JavaScript's toISOString does: UTC
// with milliseconds, and a signed six-digit year outside 0000–9999.
func isoTime(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	y := t.Year()
	year := fmt.Sprintf("%04d", y)
	if y < 0 || y > 9999 {
		sign := "+"
		if y < 0 {
			sign, y = "-", -y
		}
		year = fmt.Sprintf("%s%06d", sign, y)
	}
	return fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d.%03dZ", year, t.Month(), t.Day(),
		t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6)
}

func availability(r dshq.SessionRecord) string {
	switch {
	case r.Live && r.Persisted:
		return "live, persisted"
	case r.Live:
		return "live"
	case r.Persisted:
		return "persisted"
	}
	return "unavailable"
}

func sessionLine(id, title string) string { return "Session " + id + " — " + title }

func eventLine(seq int64, typ string, surface dshq.Surface, t int64) string {
	return fmt.Sprintf("seq %d | %s | %s | %s", seq, typ, surface, isoTime(t))
}

func renderSessionSearch(hits []dshq.SessionSearchHit, titles map[string]string, visible map[string]bool, capped bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Session search results (%d):\n", len(hits))
	for i, h := range hits {
		m := h.BestMatch
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, sessionLine(h.Header.ID, titles[h.Header.ID]))
		fmt.Fprintf(&b, "   Created: %s\n", isoTime(h.Header.CreatedAt))
		fmt.Fprintf(&b, "   Parent: %s\n", authz.ParentLabel(h.Header, visible))
		fmt.Fprintf(&b, "   Availability: %s\n", availability(h.SessionRecord))
		fmt.Fprintf(&b, "   Best match: %s\n", eventLine(m.Seq, m.Type, m.Surface, m.Time))
		fmt.Fprintf(&b, "   Snippet: %s\n", m.Snippet)
	}
	if capped {
		b.WriteString("\n" + capLine + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func renderEventSearch(head string, hits []dshq.EventSearchHit, capped bool) string {
	if len(hits) == 0 {
		return head + "\n\n" + noEventMatches
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nEvent search results (%d):\n", head, len(hits))
	for i, h := range hits {
		fmt.Fprintf(&b, "%d. %s\n", i+1, eventLine(h.Seq, h.Type, h.Surface, h.Time))
		fmt.Fprintf(&b, "   Snippet: %s\n", h.Snippet)
	}
	if capped {
		b.WriteString("\n" + capLine + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func descendantIDs(nodes []authz.Node) []string {
	var ids []string
	authz.Walk(nodes, func(n authz.Node, _ int) {
		if n.Session != nil {
			ids = append(ids, n.Session.Header.ID)
		}
	})
	return ids
}

func lineageEntry(r dshq.SessionRecord, titles map[string]string) string {
	return fmt.Sprintf("%s — %s | %s | %s", r.Header.ID, titles[r.Header.ID], isoTime(r.Header.CreatedAt), availability(r))
}

func renderSessionTrace(l authz.Lineage, titles map[string]string) string {
	var b strings.Builder
	id := l.Target.Header.ID
	fmt.Fprintf(&b, "%s\nCreated: %s\nAvailability: %s\n\nAncestors (nearest first):\n",
		sessionLine(id, titles[id]), isoTime(l.Target.Header.CreatedAt), availability(l.Target))
	for _, a := range l.Ancestors {
		fmt.Fprintf(&b, "- %s\n", lineageEntry(a, titles))
	}
	switch {
	case l.Boundary:
		b.WriteString("- " + authz.MsgBoundaryMarker + "\n")
	case len(l.Ancestors) == 0:
		b.WriteString("- none (target is a root session)\n")
	}
	b.WriteString("\nDescendants:\n")
	if len(l.Descendants) == 0 {
		b.WriteString("- none\n")
	}
	authz.Walk(l.Descendants, func(n authz.Node, depth int) {
		b.WriteString(strings.Repeat("  ", depth) + "- ")
		if n.Session == nil {
			b.WriteString(authz.MsgSubtreeMarker + "\n")
			return
		}
		b.WriteString(lineageEntry(*n.Session, titles) + "\n")
	})
	return strings.TrimSuffix(b.String(), "\n")
}

func seqList(seqs []int64) string {
	if len(seqs) == 0 {
		return "none"
	}
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, ", ")
}

func renderEventTrace(head string, tr dshq.EventTrace) string {
	replacedBy := "none"
	if tr.ReplacedBy != nil {
		replacedBy = strconv.FormatInt(*tr.ReplacedBy, 10)
	}
	tg := tr.Target
	return strings.Join([]string{
		head,
		"Target: " + eventLine(tg.Seq, tg.Type, tg.Surface, tg.Time),
		"Replaced by: " + replacedBy,
		"Replacement chain: " + seqList(tr.ReplacementChain),
		"Events replaced by target: " + seqList(tr.ReplacedEventSeqs),
		"Events cited directly as sources: " + seqList(tr.SourceEventSeqs),
		"Direct derived events: " + seqList(tr.DerivedEventSeqs),
	}, "\n")
}

// rawEvent returns the event's record as written, or, when only its decoded
// fields are known, the record rebuilt in envelope order.
func rawEvent(e dshq.Event) ([]byte, error) {
	if len(e.Raw) > 0 {
		return e.Raw, nil
	}
	var b bytes.Buffer
	typ, _ := json.Marshal(e.Type)
	fmt.Fprintf(&b, `{"type":%s,"seq":%d,"time":%d,"data":`, typ, e.Seq, e.Time)
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	b.Write(data)
	if len(e.SurfaceOp) > 0 {
		b.WriteString(`,"surfaceOp":`)
		b.Write(e.SurfaceOp)
	}
	if len(e.SourceEventSeqs) > 0 {
		b.WriteString(`,"sourceEventSeqs":`)
		b.Write(e.SourceEventSeqs)
	}
	if e.Ignorable {
		b.WriteString(`,"ignorable":true`)
	}
	b.WriteByte('}')
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("event seq %d is not valid JSON", e.Seq)
	}
	return b.Bytes(), nil
}

// decoded returns e with its decoded fields filled from Raw when only Raw is
// set.
func decoded(e dshq.Event) dshq.Event {
	if len(e.Data) > 0 || len(e.Raw) == 0 {
		return e
	}
	var env struct {
		Type string          `json:"type"`
		Seq  int64           `json:"seq"`
		Time int64           `json:"time"`
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(e.Raw, &env) == nil {
		e.Type, e.Seq, e.Time, e.Data = env.Type, env.Seq, env.Time, env.Data
	}
	return e
}

func neighbour(b *strings.Builder, e dshq.Event) {
	e = decoded(e)
	text := fold.Text(e)
	if text == "" {
		fmt.Fprintf(b, "- seq %d | %s | %s | %s\n", e.Seq, e.Type, isoTime(e.Time), noSemanticText)
		return
	}
	fmt.Fprintf(b, "- seq %d | %s | %s\n", e.Seq, e.Type, isoTime(e.Time))
	for _, line := range strings.Split(text, "\n") {
		b.WriteString("  " + line + "\n")
	}
}

func renderEventRead(head string, w dshq.EventWindow) (string, error) {
	target := decoded(w.Target)
	raw, err := rawEvent(w.Target)
	if err != nil {
		return "", &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric, Err: err}
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		return "", &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric, Err: err}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nTarget event seq %d:\n```json\n%s\n```\n", head, target.Seq, pretty.String())
	var before, after []dshq.Event
	for _, e := range w.Events {
		switch s := decoded(e).Seq; {
		case s < target.Seq:
			before = append(before, e)
		case s > target.Seq:
			after = append(after, e)
		}
	}
	for _, sec := range []struct {
		name   string
		events []dshq.Event
	}{{"Before:", before}, {"After:", after}} {
		if len(sec.events) == 0 {
			continue
		}
		b.WriteString("\n" + sec.name + "\n")
		for _, e := range sec.events {
			neighbour(&b, e)
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
