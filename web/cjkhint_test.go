package web

import (
	"net/url"
	"testing"
)

// The search page's hint says what a search finds, and it does: one CJK
// character finds the text that holds it (docs/search.md).
func TestTheSearchHintSaysOneCJKCharacterIsFound(t *testing.T) {
	s := newStack(t)
	seedCorpus(t, s)
	body := s.page(t, "/search?"+url.Values{"q": {"文"}}.Encode())
	mustContain(t, "one character", body, "<mark>文</mark>", `href="/s/s-9a01?page=0#e-1"`, "any run of their characters, even one")
	mustNotContain(t, "the hint", body, "two or more")
}
