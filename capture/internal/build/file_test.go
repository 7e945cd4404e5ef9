package build

import (
	"strings"
	"testing"

	"github.com/dshq/dshq/capture"
)

func TestSrcIDTakesTheFirstKeyThatIsSet(t *testing.T) {
	long := strings.Repeat("x", maxID+1)
	tests := []struct {
		name, rec, want string
		keys            []string
	}{
		{"the first key set wins", `{"id":"b","call_id":"a"}`, "a", []string{"call_id", "id"}},
		{"an empty string is not set", `{"call_id":"","id":"b"}`, "b", []string{"call_id", "id"}},
		{"none set gives the line's id", `{"id":5}`, "line-1", []string{"id"}},
		{"a set key too long gives the line's id, not the next key", `{"call_id":"` + long + `","id":"b"}`, "line-1", []string{"call_id", "id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := ParseRecord([]byte(tt.rec))
			src := &Src{Line: capture.Line{No: 1}}
			if got := src.ID(r, "", tt.keys...); got != tt.want {
				t.Errorf("ID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAppendBlocksMapsTheElementsOfAList(t *testing.T) {
	got := AppendBlocks(Arr{}, []byte(`["a",{"text":"b"},{"x":1},5]`), Text, ReasoningMember)
	if want := `[{"type":"text","text":"a"},{"type":"reasoning","text":"b"}]`; string(encode(nil, got)) != want {
		t.Errorf("AppendBlocks = %s, want %s", encode(nil, got), want)
	}
	if got := AppendBlocks(Arr{}, []byte(`"a"`), Text, nil); len(got) != 0 || got == nil {
		t.Errorf("a string gave %v, want an empty list", got)
	}
	if got := AppendBlocks(nil, []byte(`["a"]`), nil, nil); len(got) != 0 {
		t.Errorf("a nil str kept %v", got)
	}
}
