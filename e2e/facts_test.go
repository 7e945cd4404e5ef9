package e2e

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/e2e/internal/simfacts"
	"github.com/dshq/dshq/record"
)

// corpus is what every simulator reported, indexed for the checks.
type corpus struct {
	runs     []simfacts.Facts
	sessions map[string]*simfacts.Session // by id
	headers  map[string]dshq.Header       // by id, version 2 shape
	cwd      map[string]string            // session id → workspace
}

func loadCorpus(t *testing.T, paths []string) *corpus {
	t.Helper()
	c := &corpus{sessions: map[string]*simfacts.Session{}, headers: map[string]dshq.Header{}, cwd: map[string]string{}}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f simfacts.Facts
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		c.runs = append(c.runs, f)
	}
	for i := range c.runs {
		run := &c.runs[i]
		for j := range run.Sessions {
			s := &run.Sessions[j]
			if _, dup := c.sessions[s.ID]; dup {
				t.Fatalf("session %s reported twice", s.ID)
			}
			h, err := record.ParseHeader(s.Header)
			if err != nil {
				t.Fatalf("header of %s: %v", s.ID, err)
			}
			c.sessions[s.ID], c.headers[s.ID], c.cwd[s.ID] = s, h.Header, run.Cwd
		}
	}
	return c
}

// ids returns every session id, sorted.
func (c *corpus) ids() []string { return slices.Sorted(maps.Keys(c.sessions)) }

// phrases returns every phrase written, sorted.
func (c *corpus) phrases() []string {
	set := map[string]bool{}
	for _, s := range c.sessions {
		for p := range s.Phrases {
			set[p] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// holding returns the sessions whose events hold phrase, sorted; only those
// of workspace cwd when cwd is not "".
func (c *corpus) holding(phrase, cwd string) []string {
	var out []string
	for id, s := range c.sessions {
		if _, ok := s.Phrases[phrase]; ok && (cwd == "" || c.cwd[id] == cwd) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// role returns the session of run i with role r.
func (c *corpus) role(i int, r simfacts.Role) *simfacts.Session {
	for j := range c.runs[i].Sessions {
		if s := &c.runs[i].Sessions[j]; s.Role == r {
			return s
		}
	}
	return nil
}

// expectedSurface is the surface of each event of s as its writer meant it:
// a node a compaction replaced is shadowed, every other surface event is
// current (the simulator's logs replace nothing else), the rest log-only.
func expectedSurface(s *simfacts.Session) []dshq.Surface {
	shadowed := map[int64]bool{}
	if s.Compaction != nil {
		for _, seq := range s.Compaction.ShadowedSeqs {
			shadowed[seq] = true
		}
	}
	out := make([]dshq.Surface, len(s.Events))
	for i, raw := range s.Events {
		var env struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &env)
		switch {
		case shadowed[int64(i)]:
			out[i] = dshq.SurfaceShadowed
		case dshq.IsSurfaceType(env.Type):
			out[i] = dshq.SurfaceCurrent
		default:
			out[i] = dshq.SurfaceLogOnly
		}
	}
	return out
}

func sorted(s []int64) []int64 {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
