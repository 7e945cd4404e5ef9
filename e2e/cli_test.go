package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/e2e/internal/simfacts"
)

// runCLI runs a dshq client command against the deployment at url as the
// trusted user and returns its standard output; a non-zero exit fails the
// test with its one-line error.
func runCLI(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.dshq, append(args, "--nats-url", url, "--user", "trusted")...)
	cmd.Env = append(os.Environ(), "DSH_NATS_PASSWORD="+trustedPassword)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("dshq %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// checkCLI checks the dshq client commands against what the simulators
// wrote: export gives every log back as written, search finds the phrases,
// stats counts the corpus.
func checkCLI(t *testing.T, url string, c *corpus, last uint64) {
	t.Run("dshq export writes every log back as it was written", func(t *testing.T) {
		for i := range c.runs {
			for _, role := range []simfacts.Role{simfacts.RoleRoot, simfacts.RoleFork, simfacts.RoleSubagent} {
				s := c.role(i, role)
				lines := strings.Split(strings.TrimSuffix(string(runCLI(t, url, "export", s.ID)), "\n"), "\n")
				if len(lines) != 1+len(s.Events) {
					t.Fatalf("export %s: %d lines, want %d", s.ID, len(lines), 1+len(s.Events))
				}
				if !jsonEqual(t, []byte(lines[0]), s.Header) {
					t.Errorf("export %s: header %s, want %s", s.ID, lines[0], s.Header)
				}
				for j, raw := range s.Events {
					if lines[1+j] != string(raw) {
						t.Errorf("export %s line %d:\n got %s\nwant %s", s.ID, 2+j, lines[1+j], raw)
					}
				}
			}
		}
	})
	t.Run("dshq search finds a phrase in exactly the sessions holding it", func(t *testing.T) {
		for i := range c.runs {
			for phrase := range c.role(i, simfacts.RoleRoot).Phrases {
				var page dshq.SessionSearchPage
				if err := json.Unmarshal(runCLI(t, url, "search", phrase, "--json", "--limit", "100"), &page); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, h := range page.Items {
					got = append(got, h.Header.ID)
				}
				slices.Sort(got)
				if want := c.holding(phrase, ""); !slices.Equal(got, want) {
					t.Errorf("search %q: %v, want %v", phrase, got, want)
				}
			}
		}
	})
	t.Run("dshq stats counts the corpus with nothing quarantined and no lag", func(t *testing.T) {
		var st struct {
			Generation  uint64 `json:"generation"`
			Lag         uint64 `json:"lag"`
			Sessions    int64  `json:"sessions"`
			Events      int64  `json:"events"`
			Quarantined int64  `json:"quarantined"`
		}
		if err := json.Unmarshal(runCLI(t, url, "stats", "--json"), &st); err != nil {
			t.Fatal(err)
		}
		var events int64
		for _, s := range c.sessions {
			events += int64(len(s.Events))
		}
		if st.Generation != last || st.Lag != 0 || st.Sessions != int64(len(c.sessions)) || st.Events != events || st.Quarantined != 0 {
			t.Errorf("stats %+v; want generation %d, no lag, %d sessions, %d events, nothing quarantined", st, last, len(c.sessions), events)
		}
	})
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
