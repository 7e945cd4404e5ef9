package words

import (
	"reflect"
	"testing"
)

func TestEachSplitsWordsAndScripts(t *testing.T) {
	type w struct {
		Text string
		CJK  bool
	}
	cases := []struct {
		in   string
		want []w
	}{
		{"retry budget, 3x!", []w{{"retry", false}, {"budget", false}, {"3x", false}}},
		{"in 中文and 重试预算", []w{{"in", false}, {"中文", true}, {"and", false}, {"重试预算", true}}},
		{"cafe\u0301 ok", []w{{"cafe\u0301", false}, {"ok", false}}},
		{"bad\xffutf8", []w{{"bad", false}, {"utf8", false}}},
		{"", nil},
	}
	for _, c := range cases {
		var got []w
		Each(c.in, func(s, e int, cjk bool) { got = append(got, w{c.in[s:e], cjk}) })
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("Each(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestFold(t *testing.T) {
	for in, want := range map[string]string{"CAFÉ": "café"[:0] + "cafe", "Straße": "straße", "ÅNGSTRÖM": "angstrom"} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
	if got := FoldCJK("ｶﾀｶﾅ"); got != "カタカナ" {
		t.Errorf("FoldCJK = %q", got)
	}
}
