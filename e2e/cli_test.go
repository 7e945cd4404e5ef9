package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/e2e/internal/simfacts"
)

// runCLI runs a dshq client command against the deployment at url as the
// trusted user and returns its standard output; a non-zero exit fails the
// test with its one-line error.
func runCLI(t *testing.T, url string, args ...string) []byte {
	t.Helper()
	out, err := runCLIFor(time.Minute, url, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runCLIFor is runCLI with a time limit d, returning the output so far with
// the error.
func runCLIFor(d time.Duration, url string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.dshq, append(args, "--nats-url", url, "--user", "trusted")...)
	cmd.Env = append(os.Environ(), "DSH_NATS_PASSWORD="+trustedPassword)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("dshq %s: %v: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.Bytes(), nil
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

// feedEvents counts the event messages the feed stream holds for session id
// (subjects dsh.feed.<workspace>.<id>.event; the test's ids are plain
// tokens).
func feedEvents(t *testing.T, url, id string) uint64 {
	t.Helper()
	nc := connectTrusted(t, url)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "DSH_FEED")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("dsh.feed.*."+id+".event"))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// checkTail follows the feed of run's workspace from generation 0 with `dshq
// tail` and checks that every event written there arrives exactly once
// (docs/protocol.md#54-retention-and-resume: a subscriber resumes from any
// retained generation, nothing dropped or repeated). A failure says whether the
// feed stream itself lacks the events (they were never published) or the tail
// did not deliver them.
func checkTail(t *testing.T, url string, c *corpus, run simfacts.Facts) {
	t.Helper()
	want := map[string]bool{}
	for _, s := range run.Sessions {
		for seq := range s.Events {
			want[fmt.Sprintf("%s/%d", s.ID, seq)] = true
		}
	}
	out, err := runCLIFor(20*time.Second, url, "tail", "--workspace", run.Cwd, "--from", "0", "--kinds", "event", "--json", "--count", strconv.Itoa(len(want)))
	if err != nil {
		t.Errorf("%v (after %d bytes of output)", err, len(out))
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			SessionID string `json:"sessionId"`
			Event     struct {
				Seq int64 `json:"seq"`
			} `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("tail line %q: %v", line, err)
		}
		got[fmt.Sprintf("%s/%d", m.SessionID, m.Event.Seq)]++
	}
	for k, n := range got {
		if !want[k] || n != 1 {
			t.Errorf("event %s delivered %d times (written: %v)", k, n, want[k])
		}
	}
	missing := map[string][]string{}
	for _, s := range run.Sessions {
		for seq := range s.Events {
			if k := fmt.Sprintf("%s/%d", s.ID, seq); got[k] == 0 {
				missing[s.ID] = append(missing[s.ID], strconv.Itoa(seq))
			}
		}
	}
	for id, seqs := range missing {
		// Tell a feed that never held the events from a tail that
		// did not deliver them.
		t.Errorf("events of %s never delivered: seqs %s; the feed stream holds %d event messages of it (%d written)",
			id, strings.Join(seqs, ","), feedEvents(t, url, id), len(c.sessions[id].Events))
	}
}
