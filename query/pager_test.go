package query

import (
	"errors"
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

// pagesOf serves fixed pages by cursor and records each call's cursor and
// minimum generation.
type pagesOf struct {
	next    map[string]string
	cursors []string
	minGens []uint64
}

func (p *pagesOf) page(cursor string, opts []CallOption) (string, uint64, error) {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	g := uint64(0)
	if o.minGeneration != nil {
		g = *o.minGeneration
	}
	p.cursors, p.minGens = append(p.cursors, cursor), append(p.minGens, g)
	next, ok := p.next[cursor]
	if !ok {
		return "", 0, errors.New("no such page")
	}
	return next, uint64(10 + len(p.cursors)), nil
}

func TestFollow(t *testing.T) {
	t.Run("every page is asked once, later ones at the generation of the one before", func(t *testing.T) {
		p := &pagesOf{next: map[string]string{"": "a", "a": "b", "b": ""}}
		if err := Follow([]CallOption{WithTimeoutMs(100)}, p.page); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.cursors, []string{"", "a", "b"}) || !slices.Equal(p.minGens, []uint64{0, 11, 12}) {
			t.Fatalf("cursors %q, min generations %v", p.cursors, p.minGens)
		}
	})
	t.Run("a repeated cursor is an invalid cursor", func(t *testing.T) {
		p := &pagesOf{next: map[string]string{"": "a", "a": "b", "b": "a"}}
		if err := Follow(nil, p.page); dshq.ErrorCode(err) != dshq.CodeInvalidCursor || len(p.cursors) != 3 {
			t.Fatalf("err %v after %q", err, p.cursors)
		}
	})
	t.Run("a page's failure ends the walk with it", func(t *testing.T) {
		p := &pagesOf{next: map[string]string{"": "gone"}}
		if err := Follow(nil, p.page); err == nil || err.Error() != "no such page" {
			t.Fatalf("err %v", err)
		}
	})
}
