package projection

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

func TestSnapshot_OrdersSessionsAndChildren(t *testing.T) {
	e := newEnv(t)
	header := func(id string, createdAt int64, parent string) []byte {
		p := ""
		if parent != "" {
			p = fmt.Sprintf(`,"parentSession":%q`, parent)
		}
		return line(`{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/w"%s,"isSeeded":false}`, id, createdAt, p)
	}
	// Published out of order; ids compare by UTF-8 bytes ("Z" < "a" < "é").
	var last uint64
	for _, s := range []struct {
		id        string
		createdAt int64
		parent    string
	}{
		{"root", 100, ""},
		{"é-child", 300, "root"},
		{"a-child", 300, "root"},
		{"Z-child", 300, "root"},
		{"early-child", 200, "root"},
		{"grandchild", 400, "a-child"},
		{"orphan", 50, "missing-parent"},
		{"ab", 500, ""},
		{"a", 500, ""},
	} {
		last = e.publish(token(t, s.id), header(s.id, s.createdAt, s.parent))
	}
	r := e.start(t.TempDir())
	waitGen(t, r.p, last)
	view(t, r.p, func(s Snapshot) error {
		var all []string
		var keys [][]byte
		if err := s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			all = append(all, info.Header.Header.ID)
			keys = append(keys, info.OrderKey)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		want := []string{"a", "ab", "grandchild", "Z-child", "a-child", "é-child", "early-child", "root", "orphan"}
		if !slices.Equal(all, want) {
			t.Errorf("sessions by created = %v, want %v", all, want)
		}
		t.Run("a listing resumes strictly after a key", func(t *testing.T) {
			for i := range keys {
				var rest []string
				_ = s.SessionsByCreated(keys[i], func(info dshq.SessionInfo) bool {
					rest = append(rest, info.Header.Header.ID)
					return true
				})
				if !slices.Equal(rest, want[i+1:]) {
					t.Errorf("after %s: %v, want %v", want[i], rest, want[i+1:])
				}
			}
		})
		t.Run("a listing stops when fn returns false", func(t *testing.T) {
			n := 0
			_ = s.SessionsByCreated(nil, func(dshq.SessionInfo) bool { n++; return n < 3 })
			if n != 3 {
				t.Errorf("fn called %d times, want 3", n)
			}
		})
		t.Run("children are ordered by createdAt then id", func(t *testing.T) {
			if got, want := s.Children("root"), []string{"early-child", "Z-child", "a-child", "é-child"}; !slices.Equal(got, want) {
				t.Errorf("children of root = %v, want %v", got, want)
			}
			if got := s.Children("a-child"); !slices.Equal(got, []string{"grandchild"}) {
				t.Errorf("children of a-child = %v", got)
			}
			if got := s.Children("missing-parent"); !slices.Equal(got, []string{"orphan"}) {
				t.Errorf("children of an unresolved parent = %v", got)
			}
			if got := s.Children("a"); got != nil {
				t.Errorf("children of a childless session = %v", got)
			}
		})
		t.Run("an unknown session or event is absent", func(t *testing.T) {
			if _, ok := s.Session("nope"); ok {
				t.Error("unknown session found")
			}
			if _, ok := s.Event("root", 0); ok {
				t.Error("event of an empty session found")
			}
			if _, ok := s.Event("root", -1); ok {
				t.Error("negative seq found")
			}
			if got := s.SurfaceSeqs("nope"); got != nil {
				t.Errorf("surface of unknown session = %v", got)
			}
			if cl, err := s.Closers("nope"); cl != nil || err != nil {
				t.Errorf("closers of unknown session = %v, %v", cl, err)
			}
		})
		return nil
	})
}
