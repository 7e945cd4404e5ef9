package fold

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// placeholders substitutes the corpus's template placeholders in a header
// line (the corpus README).
var placeholders = strings.NewReplacer(
	"{{cwd}}", "/work/cwd",
	"{{sessionId}}", "s-fixture",
	"{{parent}}", "s-parent",
)

// readLog reads a JSONL session log: a header line, then events; packed chunk
// rows (docs/file-format.md#packed-chunk-rows) are expanded into
// assistant/chunk events.
func readLog(t testing.TB, path string) (dshq.HeaderRecord, []dshq.Event) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, events, err := parseLog(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h, events
}

func parseLog(b []byte) (dshq.HeaderRecord, []dshq.Event, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	if !sc.Scan() {
		return dshq.HeaderRecord{}, nil, fmt.Errorf("no header line")
	}
	h, err := record.ParseHeader([]byte(placeholders.Replace(sc.Text())))
	if err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	var events []dshq.Event
	for line := 2; sc.Scan(); line++ {
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		expanded, err := expandRow(text)
		if err != nil {
			return h, nil, fmt.Errorf("line %d: %w", line, err)
		}
		for _, raw := range expanded {
			e, err := record.ParseEvent(raw)
			if err != nil {
				return h, nil, fmt.Errorf("line %d: %w", line, err)
			}
			events = append(events, e)
		}
	}
	return h, events, sc.Err()
}

// expandRow returns the event records of one line: the line itself, or the
// assistant/chunk events of a packed chunk row.
func expandRow(line []byte) ([][]byte, error) {
	var row struct {
		Type  string          `json:"type"`
		Seq0  int64           `json:"seq0"`
		Time0 int64           `json:"time0"`
		Data  json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(line, &row); err != nil {
		return nil, err
	}
	var kind string
	switch row.Type {
	case "text-chunks":
		kind = "text-delta"
	case "reasoning-chunks":
		kind = "reasoning-delta"
	case "tool-call-chunks":
		kind = "tool-call-delta"
	default:
		return [][]byte{line}, nil
	}
	var d struct {
		Turn  json.RawMessage `json:"turn"`
		Step  json.RawMessage `json:"step"`
		Index json.RawMessage `json:"index"`
		Dt    []int64         `json:"dt"`
		Texts []string        `json:"texts"`
		Args  []string        `json:"args"`
		ID    string          `json:"id"`
		Name  *string         `json:"name"`
	}
	if err := json.Unmarshal(row.Data, &d); err != nil {
		return nil, err
	}
	members := d.Texts
	if kind == "tool-call-delta" {
		members = d.Args
	}
	if len(members) == 0 || len(d.Dt) != len(members)-1 {
		return nil, fmt.Errorf("malformed %s storage row", row.Type)
	}
	out := make([][]byte, 0, len(members))
	tm := row.Time0
	for k, m := range members {
		if k > 0 {
			tm += d.Dt[k-1]
		}
		var chunk json.RawMessage
		if kind == "tool-call-delta" {
			kv := []any{"type", jsonString(kind), "index", d.Index, "id", jsonString(d.ID)}
			if d.Name != nil {
				kv = append(kv, "name", jsonString(*d.Name))
			}
			chunk = jsonObject(append(kv, "argumentsDelta", jsonString(m))...)
		} else {
			chunk = jsonObject("type", jsonString(kind), "index", d.Index, "text", jsonString(m))
		}
		out = append(out, jsonObject(
			"type", jsonString("assistant/chunk"),
			"seq", json.RawMessage(fmt.Sprint(row.Seq0+int64(k))),
			"time", json.RawMessage(fmt.Sprint(tm)),
			"data", jsonObject("turn", d.Turn, "step", d.Step, "chunk", chunk),
		))
	}
	return out, nil
}

// ev builds an event from a JSON record written in a test.
func ev(t testing.TB, raw string) dshq.Event {
	t.Helper()
	e, err := record.ParseEvent([]byte(raw))
	if err != nil {
		t.Fatalf("bad test event %s: %v", raw, err)
	}
	return e
}

// g0Header and g2Header are headers for hand-written test logs.
func g0Header() dshq.HeaderRecord {
	return dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: "s-g0"}, FormatVersion: dshq.FormatVersion0}
}

func g2Header() dshq.HeaderRecord {
	return dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: "s-g2"}, FormatVersion: dshq.FormatVersion2}
}

// mustMarshal returns the state's encoding.
func mustMarshal(t testing.TB, s *State) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roundTrip returns a state decoded from s's encoding.
func roundTrip(t testing.TB, s *State) *State {
	t.Helper()
	b := mustMarshal(t, s)
	var out State
	if err := out.UnmarshalBinary(b); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	if again := mustMarshal(t, &out); !bytes.Equal(again, b) {
		t.Fatalf("round trip changed the encoding:\n%x\n%x", b, again)
	}
	return &out
}

// toJSON is indented JSON for comparisons and goldens.
func toJSON(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
