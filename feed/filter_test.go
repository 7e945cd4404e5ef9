package feed

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// oneEventCommits publishes commits 1..n of one event each: odd generations
// in /ws/a, even ones in /ws/b.
func oneEventCommits(t *testing.T, pub *Publisher, n uint64) []Message {
	t.Helper()
	var all []Message
	for g := uint64(1); g <= n; g++ {
		cwd := "/ws/b"
		if g%2 == 1 {
			cwd = "/ws/a"
		}
		m := eventMsg(t, g, cwd, "s-"+cwd, int64(g))
		if err := pub.Publish(testContext(t), []Message{m}); err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
	}
	return all
}

func readN(t *testing.T, sub *Subscription, n int) []Message {
	t.Helper()
	var got []Message
	for len(got) < n {
		m, err := sub.Next(testContext(t))
		if err != nil {
			t.Fatalf("next after %d: %v", len(got), err)
		}
		got = append(got, m)
	}
	return got
}

func TestAgedOutStartPointsAreRefused(t *testing.T) {
	pub, js := setup(t, StreamConfig{MaxMsgs: 10})
	ctx := testContext(t)
	all := oneEventCommits(t, pub, 20) // the stream keeps generations 11..20
	inA := func(ms []Message) []Message {
		var out []Message
		for _, m := range ms {
			if m.Workspace == wsOf("/ws/a") {
				out = append(out, m)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		filter Filter
		from   Start
		// want is the expected delivery, or nil when err is expected.
		want []Message
		err  *NotRetainedError
	}{
		{"the whole feed from generation 0 is refused, naming generation 11", Filter{}, AfterGeneration(0),
			nil, &NotRetainedError{OldestGeneration: 11, OldestPosition: 10}},
		{"a generation before the oldest retained one is refused", Filter{}, AfterGeneration(10),
			nil, &NotRetainedError{OldestGeneration: 11, OldestPosition: 10}},
		{"the oldest retained generation is accepted", Filter{}, AfterGeneration(11), all[11:], nil},
		{"OrOldest starts at the oldest retained message", Filter{}, AfterGeneration(3).OrOldest(), all[10:], nil},
		{"Oldest starts at the oldest retained message", Filter{}, Oldest(), all[10:], nil},
		{"an aged-out position is refused", Filter{}, AfterPosition(5),
			nil, &NotRetainedError{OldestPosition: 10, OldestGeneration: 11}},
		{"the position before the oldest is accepted", Filter{}, AfterPosition(10), all[10:], nil},
		{"a workspace whose first retained message is older than the start point resumes",
			Filter{Workspace: wsOf("/ws/a")}, AfterGeneration(12), inA(all[12:]), nil},
		{"a workspace whose first retained message is newer than the start point is refused",
			Filter{Workspace: wsOf("/ws/a")}, AfterGeneration(8), nil, &NotRetainedError{OldestGeneration: 11, OldestPosition: 10}},
		{"a workspace with no retained message cannot show continuity",
			Filter{Workspace: wsOf("/ws/c")}, AfterGeneration(15), nil, &NotRetainedError{OldestPosition: 10, NoneRetained: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := Tail(ctx, js, tt.filter, tt.from)
			if tt.err != nil {
				var nr *NotRetainedError
				if !errors.As(err, &nr) || !errors.Is(err, ErrNotRetained) {
					t.Fatalf("tail: %v, want *NotRetainedError", err)
				}
				if nr.OldestPosition != tt.err.OldestPosition || nr.NoneRetained != tt.err.NoneRetained ||
					(!nr.NoneRetained && nr.OldestGeneration != tt.err.OldestGeneration) {
					t.Fatalf("tail: %+v, want %+v", nr, tt.err)
				}
				if !strings.Contains(err.Error(), "aged out") {
					t.Fatalf("error %q does not say what happened", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("tail: %v", err)
			}
			defer sub.Stop()
			expectSame(t, "delivery", readN(t, sub, len(tt.want)), tt.want)
		})
	}
}

func TestWorkspaceSubscriptionSeesNothingOfAnotherWorkspace(t *testing.T) {
	wsA, wsB := "/ws/a", "/ws/b"
	commits := [][]Message{
		{eventMsg(t, 1, wsA, "a1", 0), eventMsg(t, 1, wsB, "b1", 0)},
		{eventMsg(t, 2, wsB, "b1", 1), leaseMsg(t, 2, wsB, "b1", true)},
		{eventMsg(t, 3, wsA, "a2", 0), eventMsg(t, 3, wsA, "a1", 1), leaseMsg(t, 3, wsA, "a1", true)},
		{eventMsg(t, 4, wsB, "b2", 0)},
	}
	tests := []struct {
		name     string
		filter   Filter
		want     []Message
		sentinel Message // published after, and next to arrive
	}{
		{"a workspace subscription sees its workspace only", Filter{Workspace: wsOf(wsA)},
			[]Message{commits[0][0], commits[2][0], commits[2][1], commits[2][2]}, eventMsg(t, 5, wsA, "a3", 0)},
		{"a session subscription sees its session only", Filter{SessionID: "b1"},
			[]Message{commits[0][1], commits[1][0], commits[1][1]}, eventMsg(t, 6, wsB, "b1", 2)},
		{"a kind subscription sees its kind only", Filter{Kinds: []Kind{KindLease}},
			[]Message{commits[1][1], commits[2][2]}, leaseMsg(t, 7, wsB, "b2", true)},
		{"several kinds of one workspace", Filter{Workspace: wsOf(wsB), Kinds: []Kind{KindLease, KindSurface}},
			[]Message{commits[1][1]}, leaseMsg(t, 8, wsB, "b1", false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pub, js := setup(t, StreamConfig{})
			ctx := testContext(t)
			for _, c := range commits {
				if err := pub.Publish(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			sub, err := Tail(ctx, js, tt.filter, AfterGeneration(0))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Stop()
			got := readN(t, sub, len(tt.want))
			expectSame(t, "catch-up", got, tt.want)
			// Another workspace's message, then the sentinel: the
			// sentinel must be the next delivery.
			other := eventMsg(t, tt.sentinel.Generation, "/ws/other", "o", int64(tt.sentinel.Generation))
			if err := pub.Publish(ctx, []Message{other, tt.sentinel}); err != nil {
				t.Fatal(err)
			}
			expectSame(t, "live", readN(t, sub, 1), []Message{tt.sentinel})
		})
	}
}

// hostileIDs are session ids that are not their own subject token.
var hostileIDs = []string{
	"a.b", "a b", "*", ">", "x.>", "$JS.API.STREAM.DELETE.DSH_FEED", "日本語のセッション",
	"~abc", "_q", "!", "id/with/slashes", "tab\u00a0nbsp", strings.Repeat("long", 100),
}

func TestHostileSessionIDsStayInTheirSubjects(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	cwd := "a.b.*.> \u2028 /weird"
	var all []Message
	for i, id := range hostileIDs {
		m := eventMsg(t, uint64(i+1), cwd, id, 0)
		subj, err := Subject(m.Workspace, m.Token, m.Kind)
		if err != nil {
			t.Fatalf("subject of %q: %v", id, err)
		}
		parts := strings.Split(subj, ".")
		if len(parts) != 5 || parts[3] != m.Token || strings.ContainsAny(m.Token, " *>\t") {
			t.Fatalf("id %q: subject %q does not keep the token in one subject token", id, subj)
		}
		if err := pub.Publish(ctx, []Message{m}); err != nil {
			t.Fatalf("publish %q: %v", id, err)
		}
		all = append(all, m)
	}
	for i, id := range hostileIDs {
		t.Run(fmt.Sprintf("session %d is delivered alone", i), func(t *testing.T) {
			sub, err := Tail(ctx, js, Filter{SessionID: id}, AfterGeneration(0))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Stop()
			expectSame(t, "session", readN(t, sub, 1), all[i:i+1])
			// Nothing else is pending for this session: a live probe of
			// the next message times out.
			if _, err := sub.iter.Next(jetstream.NextMaxWait(50_000_000)); err == nil {
				t.Fatalf("session %q received a second message", id)
			}
		})
	}
}

func TestMalformedMessagesAreReportedAndSkipped(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	good1 := eventMsg(t, 1, "/ws/a", "s", 0)
	good2 := eventMsg(t, 3, "/ws/a", "s", 1)
	if err := pub.Publish(ctx, []Message{good1}); err != nil {
		t.Fatal(err)
	}
	subj, _ := Subject(good1.Workspace, good1.Token, KindEvent)
	data, _ := Encode(&good1)
	// Someone with publish rights on the feed writes junk: a body that is
	// not a message, and a message on another session's subject.
	if _, err := js.Publish(ctx, subj, []byte("junk")); err != nil {
		t.Fatal(err)
	}
	other, _ := Subject(good1.Workspace, "t", KindEvent)
	if _, err := js.Publish(ctx, other, data); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, []Message{good2}); err != nil {
		t.Fatal(err)
	}
	for _, from := range []Start{Oldest(), AfterGeneration(1)} {
		t.Run("from "+from.String(), func(t *testing.T) {
			sub, err := Tail(ctx, js, Filter{}, from)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Stop()
			var got []string
			for len(got) < 4 {
				m, err := sub.Next(ctx)
				var me *MalformedError
				switch {
				case errors.As(err, &me) && errors.Is(err, ErrMalformed):
					got = append(got, fmt.Sprintf("malformed@%d", me.Position))
				case err != nil:
					t.Fatal(err)
				default:
					got = append(got, fmt.Sprintf("gen%d@%d", m.Generation, m.Position))
				}
				if m.Generation == 3 {
					break
				}
			}
			want := "[gen1@1 malformed@2 malformed@3 gen3@4]"
			if from.gen == 1 {
				want = "[malformed@2 malformed@3 gen3@4]"
			}
			if fmt.Sprint(got) != want {
				t.Fatalf("delivered %v, want %s", got, want)
			}
		})
	}
}
