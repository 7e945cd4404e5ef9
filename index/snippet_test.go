package index

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestSnippet transcribes the snippet rule (docs/search.md#snippets) case by
// case. The text "abcdefghijklmnopqrst" has 20 code points; match is a byte
// offset.
func TestSnippet(t *testing.T) {
	const alpha = "abcdefghijklmnopqrst"
	for _, c := range []struct {
		name       string
		text       string
		match, max int
		want       string
	}{
		{"text that fits is returned whole", "hello world", 0, 240, "hello world"},
		{"text exactly the limit is returned whole", "abcdefghij", 9, 10, "abcdefghij"},
		{"whitespace runs collapse and ends are trimmed", "  a\n\n b\t c \u3000", 0, 240, "a b c"},
		{"a limit of one is a lone ellipsis", alpha, 10, 1, "…"},
		{"a match at the start keeps the start and cuts the end", alpha, 0, 10, "abcdefghi…"},
		{"a match in the middle starts a third of the limit before it", alpha, 10, 10, "…hijklmno…"},
		{"a window reaching the end drops the suffix and slides back", alpha, 18, 10, "…lmnopqrst"},
		{"the prefix stays when the window slides back", "abcdefghijk", 10, 10, "…cdefghijk"},
		{"a match beyond the window moves the window to end at it", alpha, 5, 3, "…f…"},
		{"no room for content keeps the match and drops the suffix", "abcdef", 3, 2, "…d"},
		{"no room at the start keeps the first character", "abcdef", 0, 2, "a…"},
		{"no room at the end keeps the last character", "abcdef", 5, 2, "…f"},
		{"an unknown match starts at the beginning", alpha, -1, 10, "abcdefghi…"},
		{"a match offset counts collapsed whitespace once", "a    b c d e f g h", 5, 4, "… b…"},
		{"code points are counted, not bytes", "café — naïve " + strings.Repeat("x", 20), 0, 12, "café — naïv…"},
		{"newlines are dropped from the snippet", "line one\nline two", 0, 240, "line one line two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Snippet(c.text, c.match, c.max)
			if got != c.want {
				t.Fatalf("Snippet(%q, %d, %d) = %q, want %q", c.text, c.match, c.max, got, c.want)
			}
			if n := utf8.RuneCountInString(got); n > c.max {
				t.Fatalf("snippet has %d code points, limit %d", n, c.max)
			}
		})
	}
}

// FuzzSnippet: any text, match and limit give a snippet within the limit,
// without leading/trailing or doubled spaces, and never panic.
func FuzzSnippet(f *testing.F) {
	f.Add("abcdefghijklmnopqrst", 10, 10)
	f.Add("  café —\n naïve  ", 3, 2)
	f.Add("中文字块", 3, 1)
	f.Fuzz(func(t *testing.T, text string, match, limit int) {
		if limit > 1000 || limit < -1 {
			return
		}
		got := Snippet(text, match, limit)
		if n := utf8.RuneCountInString(got); n > max(limit, 0) {
			t.Fatalf("Snippet(%q, %d, %d) = %q: %d code points", text, match, limit, got, n)
		}
		if strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") || strings.Contains(got, "  ") {
			t.Fatalf("Snippet(%q, %d, %d) = %q: stray spaces", text, match, limit, got)
		}
	})
}
