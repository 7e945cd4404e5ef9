package feedcommit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// readLog reads testdata/<name> (a JSONL log) and gives its header another
// id and cwd.
func readLog(t *testing.T, name, id, cwd string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			lines = append(lines, append([]byte(nil), l...))
		}
	}
	var h map[string]any
	if err := json.Unmarshal(lines[0], &h); err != nil {
		t.Fatal(err)
	}
	h["id"], h["cwd"] = id, cwd
	if lines[0], err = json.Marshal(h); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestProjectorCommitsReachTheFeed runs the real pipeline: records
// published to DSH_SESSIONS, the projector folding them, its OnCommit hook
// turning each commit into feed messages (FromCommit on a snapshot of the
// commit's generation) and queueing them for publication; then a
// subscriber reads the feed and resumes from every generation.
func TestProjectorCommitsReachTheFeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := testenv.Start(t).JS
	if _, err := feed.EnsureStream(ctx, js, feed.StreamConfig{}); err != nil {
		t.Fatal(err)
	}

	pub := feed.NewPublisher(js)
	q := feed.NewQueue(pub)
	defer q.Close(ctx)
	hookErrs := make(chan error, 100)
	enqueued := make(chan uint64, 1000) // generations of enqueued commits
	var commits []projection.Commit     // every commit, for Rederive (hook goroutine only until Run ends)
	var p *projection.Projector
	hook := func(c projection.Commit) {
		err := p.View(ctx, c.Generation, func(s projection.Snapshot) error {
			msgs, err := FromCommit(c, s)
			if err != nil {
				return err
			}
			return q.Enqueue(msgs)
		})
		if err != nil {
			hookErrs <- fmt.Errorf("commit at generation %d: %w", c.Generation, err)
			return
		}
		commits = append(commits, c)
		enqueued <- c.Generation
	}
	p, err := projection.Open(ctx, js, t.TempDir(), projection.WithOnCommit(hook), projection.WithBatchSize(7),
		projection.WithLogger(testenv.Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(runCtx) }()
	defer func() {
		stopRun()
		<-runDone
		p.Close()
	}()

	// Two sessions in two workspaces, and a record that is no session.
	var last uint64
	publish := func(id string, line []byte) {
		tok, err := record.SubjectToken(id)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := js.Publish(ctx, "dsh.log."+tok, line)
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	logs := map[string][][]byte{
		"s-a":    readLog(t, "upstream-2.5.jsonl", "s-a", "/home/u/a"),
		"s.b ~!": readLog(t, "upstream-2.5.jsonl", "s.b ~!", "/home/u/b"),
	}
	for i := range logs["s-a"] {
		publish("s-a", logs["s-a"][i])
		publish("s.b ~!", logs["s.b ~!"][i])
	}
	publish("bad-header", []byte(`{"type":"session","version":7,"id":"bad-header"}`))

	for g := uint64(0); g < last; {
		select {
		case g = <-enqueued:
		case err := <-hookErrs:
			t.Fatalf("feed hook: %v", err)
		case <-ctx.Done():
			t.Fatalf("the projector did not commit generation %d (at %d)", last, g)
		}
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-hookErrs:
		t.Fatalf("feed hook: %v", err)
	default:
	}
	if g, err := pub.LastPublishedGeneration(ctx); err != nil || g != last {
		t.Fatalf("last published generation %d, %v; want %d", g, err, last)
	}

	sub, err := feed.Tail(ctx, js, feed.Filter{}, feed.Oldest())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, dshq.FeedStream)
	if err != nil {
		t.Fatal(err)
	}
	total := int(st.CachedInfo().State.Msgs)
	var all []feed.Message
	for len(all) < total {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, m)
	}
	sub.Stop()
	checkPipelineFeed(t, all, logs, last)

	// Every commit re-derived from the final snapshot yields the same
	// message ids (the projector's start-up repair).
	stopRun()
	<-runDone
	runDone <- nil
	err = p.View(ctx, 0, func(snap projection.Snapshot) error {
		var prev uint64
		for _, c := range commits {
			if len(c.Sessions)+len(c.Events)+len(c.Quarantined) == 0 {
				continue // lease-only or a rebuild's empty commit
			}
			rc, err := Rederive(snap, prev, c.Generation)
			if err != nil {
				return err
			}
			want, err := msgIDs(c, snap)
			if err != nil {
				return err
			}
			got, err := msgIDs(rc, snap)
			if err != nil {
				return err
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("commit (%d, %d] re-derived:\n%v\nwant\n%v", prev, c.Generation, got, want)
			}
			prev = c.Generation
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Resume from every generation the feed holds: exactly the suffix.
	for i := range all {
		g := all[i].Generation
		if i > 0 && all[i-1].Generation == g {
			continue
		}
		sub, err := feed.Tail(ctx, js, feed.Filter{}, feed.AfterGeneration(g))
		if err != nil {
			t.Fatal(err)
		}
		j := i
		for j < len(all) && all[j].Generation == g {
			j++
		}
		for k := j; k < len(all); k++ {
			m, err := sub.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Position != all[k].Position {
				t.Fatalf("after generation %d: got position %d, want %d", g, m.Position, all[k].Position)
			}
		}
		sub.Stop()
	}
}

// checkPipelineFeed checks what the feed says about the two sessions and
// the refused record.
func checkPipelineFeed(t *testing.T, all []feed.Message, logs map[string][][]byte, last uint64) {
	t.Helper()
	type seen struct {
		sessions, titles int
		events           []int64
		shadowed         map[int64]int64
	}
	per := map[string]*seen{}
	var quarantines []feed.Message
	var prev uint64
	for _, m := range all {
		if m.Generation < prev || m.Generation > last {
			t.Fatalf("generation %d after %d (last %d)", m.Generation, prev, last)
		}
		prev = m.Generation
		if m.Kind == feed.KindQuarantine {
			quarantines = append(quarantines, m)
			continue
		}
		s := per[m.SessionID]
		if s == nil {
			s = &seen{shadowed: map[int64]int64{}}
			per[m.SessionID] = s
		}
		switch m.Kind {
		case feed.KindSession:
			s.sessions++
		case feed.KindEvent:
			s.events = append(s.events, m.Event.Seq)
		case feed.KindSurface:
			if m.Surface.To == string(dshq.SurfaceShadowed) {
				s.shadowed[m.Surface.Seq] = *m.Surface.ReplacedBy
			}
		case feed.KindTitle:
			s.titles++
		}
	}
	for id, lines := range logs {
		s := per[id]
		if s == nil || s.sessions != 1 || len(s.events) != len(lines)-1 || s.titles != 1 {
			t.Fatalf("session %q: %+v, want one session, %d events, one title", id, s, len(lines)-1)
		}
		for i, seq := range s.events {
			if seq != int64(i) {
				t.Fatalf("session %q: event %d has seq %d", id, i, seq)
			}
		}
		// The worked example (docs/events-and-surfaces.md#a-worked-example):
		// seq 15 replaces the surface nodes 1, 5 and 7.
		if len(s.shadowed) != 3 || s.shadowed[1] != 15 || s.shadowed[5] != 15 || s.shadowed[7] != 15 {
			t.Fatalf("session %q: shadowed %v, want 1, 5, 7 by 15", id, s.shadowed)
		}
	}
	if len(quarantines) != 1 || quarantines[0].Workspace != feed.QuarantineWorkspace || quarantines[0].Token != "bad-header" {
		t.Fatalf("quarantines: %+v, want the bad header under _q", quarantines)
	}
}

// msgIDs returns the sorted message ids of a commit's messages (leases
// aside).
func msgIDs(c projection.Commit, look Lookup) ([]string, error) {
	msgs, err := FromCommit(c, look)
	if err != nil {
		return nil, err
	}
	var ids []string
	for i := range msgs {
		if msgs[i].Kind != feed.KindLease {
			ids = append(ids, feed.MsgID(&msgs[i], i))
		}
	}
	sort.Strings(ids)
	return ids, nil
}
