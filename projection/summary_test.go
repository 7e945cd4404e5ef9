package projection

import (
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

// summaryLog is a session created at createdAt whose events are at the
// given times: turn 1 asks two tools (call_1 named by its assistant
// message and again by its tool/call, call_2 only by the message), call_2
// fails; turn 2 is a tool/call of its own and a result failed by its error.
func summaryLog(id string, createdAt int64, times [13]int64) [][]byte {
	ev := func(seq int, typ, data string, extra string) []byte {
		return line(`{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, typ, seq, times[seq], data, extra)
	}
	return [][]byte{
		line(`{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/w","isSeeded":false}`, id, createdAt),
		ev(0, "turn/start", `{"turn":1}`, ""),
		ev(1, "user/message", `{"id":"u1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"go"}]}`, `,"surfaceOp":"append"`),
		ev(2, "step/start", `{"turn":1,"step":1}`, ""),
		ev(3, "assistant/message", `{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"tool-call","id":"call_1","name":"grep","arguments":"{}"},{"type":"tool-call","id":"call_2","name":"ls","arguments":"{}"}]}}`, `,"surfaceOp":"append"`),
		ev(4, "tool/call", `{"turn":1,"step":1,"callId":"call_1","name":"grep","arguments":"{}"}`, ""),
		ev(5, "tool/result", `{"turn":1,"step":1,"message":{"id":"t1","role":"user","source":{"kind":"tool","callId":"call_1"},"content":[{"type":"tool-result","toolCallId":"call_1","isError":false,"content":[{"type":"text","text":"ok"}]}]}}`, `,"surfaceOp":"append"`),
		ev(6, "tool/result", `{"turn":1,"step":1,"message":{"id":"t2","role":"user","source":{"kind":"tool","callId":"call_2"},"content":[{"type":"tool-result","toolCallId":"call_2","isError":true,"content":[{"type":"text","text":"no"}]}]}}`, `,"surfaceOp":"append"`),
		ev(7, "step/end", `{"turn":1,"step":1}`, ""),
		ev(8, "turn/end", `{"turn":1,"reason":{"kind":"completed"}}`, ""),
		ev(9, "turn/start", `{"turn":2}`, ""),
		ev(10, "step/start", `{"turn":2,"step":1}`, ""),
		ev(11, "tool/call", `{"turn":2,"step":1,"callId":"call_3","name":"sh","arguments":"{}"}`, ""),
		ev(12, "tool/result", `{"turn":2,"step":1,"error":{"name":"E","code":"X"},"message":{"id":"t3","role":"user","source":{"kind":"tool","callId":"call_3"},"content":[{"type":"tool-result","toolCallId":"call_3","isError":false,"content":[]}]}}`, `,"surfaceOp":"append"`),
	}
}

func TestSummary_CountsTurnsCallsAndFailuresAsTheLogIsApplied(t *testing.T) {
	e := newEnv(t)
	// Times out of order: the span is the least to the greatest.
	times := [13]int64{1000, 1001, 1002, 1003, 1004, 900, 1006, 1007, 1008, 5000, 5001, 5002, 5003}
	_, last := e.publishLog(summaryLog("s-sum", 500, times))
	empty := e.publish(token(t, "s-empty"), line(`{"type":"session","version":2,"id":"s-empty","createdAt":700,"isSeeded":false}`))
	r := e.start(t.TempDir(), WithBatchSize(3))
	waitGen(t, r.p, max(last, empty))
	view(t, r.p, func(s Snapshot) error {
		info, ok := s.Session("s-sum")
		if !ok || info.Summary == nil || !info.Valid() {
			t.Fatalf("no summary or invalid: %+v", info)
		}
		got := *info.Summary
		if got.EventCount != 13 || got.Turns != 2 || got.ToolCalls != 3 || got.FailedToolCalls != 2 {
			t.Errorf("counts = %+v, want 13 events, 2 turns, 3 calls (call_1 once), 2 failed", got)
		}
		if got.FirstEventAt == nil || *got.FirstEventAt != 900 || got.LastEventAt == nil || *got.LastEventAt != 5003 || got.LastActivityAt != 5003 {
			t.Errorf("span = %v..%v, activity %d; want 900..5003, 5003", got.FirstEventAt, got.LastEventAt, got.LastActivityAt)
		}
		none, _ := s.Session("s-empty")
		if sm := none.Summary; sm == nil || sm.FirstEventAt != nil || sm.LastEventAt != nil || sm.LastActivityAt != 700 || sm.ToolCalls != 0 {
			t.Errorf("a session without events: %+v, want no span and its createdAt as its activity", sm)
		}
		return nil
	})
}

func TestSummary_TheActivityOrderFollowsTheLatestEventBothWays(t *testing.T) {
	e := newEnv(t)
	header := func(id string, createdAt int64) []byte {
		return line(`{"type":"session","version":2,"id":%q,"createdAt":%d,"isSeeded":false}`, id, createdAt)
	}
	event := func(seq int, at int64) []byte {
		return line(`{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d}}`, seq, at, seq+1)
	}
	e.publish(token(t, "a"), header("a", 100))
	e.publish(token(t, "b"), header("b", 200))
	e.publish(token(t, "c"), header("c", 300))
	e.publish(token(t, "d"), header("d", 300))
	e.publish(token(t, "a"), event(0, 1000))
	last := e.publish(token(t, "b"), event(0, 500))
	r := e.start(t.TempDir(), WithBatchSize(2))
	waitGen(t, r.p, last)
	order := func(o dshq.ListOrder) []string {
		var ids []string
		view(t, r.p, func(s Snapshot) error {
			return s.SessionsInOrder(o, nil, func(info dshq.SessionInfo) bool {
				ids = append(ids, info.Header.Header.ID)
				return true
			})
		})
		return ids
	}
	check := func(o dshq.ListOrder, want ...string) {
		t.Helper()
		if got := order(o); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", o, got, want)
		}
	}
	check(dshq.OrderActivityDesc, "a", "b", "c", "d")
	check(dshq.OrderActivityAsc, "d", "c", "b", "a")
	check(dshq.OrderCreatedDesc, "c", "d", "b", "a")
	check(dshq.OrderCreatedAsc, "a", "b", "d", "c")

	// c becomes the most recently active; an older event of a moves
	// nothing.
	e.publish(token(t, "c"), event(0, 2000))
	last = e.publish(token(t, "a"), event(1, 10))
	waitGen(t, r.p, last)
	check(dshq.OrderActivityDesc, "c", "a", "b", "d")
	check(dshq.OrderActivityAsc, "d", "b", "a", "c")

	t.Run("a listing resumes strictly after any key, in both directions", func(t *testing.T) {
		for _, o := range dshq.ListOrders {
			all := order(o)
			view(t, r.p, func(s Snapshot) error {
				for i, id := range all {
					info, _ := s.Session(id)
					var rest []string
					if err := s.SessionsInOrder(o, o.Key(info), func(info dshq.SessionInfo) bool {
						rest = append(rest, info.Header.Header.ID)
						return true
					}); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(rest, all[i+1:]) {
						t.Errorf("%s after %s = %v, want %v", o, id, rest, all[i+1:])
					}
				}
				return nil
			})
		}
	})
	t.Run("each session has one key in the activity order", func(t *testing.T) {
		view(t, r.p, func(s Snapshot) error {
			sn := s.(*snapshot)
			keys := sn.tx.Bucket(bucketByActivity).Stats().KeyN
			if keys != 4 {
				t.Errorf("the activity order holds %d keys, want 4", keys)
			}
			return nil
		})
	})
}

func TestSummary_AProjectionAppliedOneRecordAtATimeMatchesOneBatch(t *testing.T) {
	e := newEnv(t)
	_, last := e.publishLog(summaryLog("s-x", 10, [13]int64{20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}))
	e.publish(token(t, "s-y"), line(`{"type":"session","version":2,"id":"s-y","createdAt":15,"isSeeded":false}`))
	last = max(last, e.publish(token(t, "s-y"), line(`{"type":"turn/start","seq":0,"time":99,"data":{"turn":1}}`)))
	one := e.start(t.TempDir(), WithBatchSize(1))
	all := e.start(t.TempDir(), WithDurable("dsh-projector-all"))
	waitGen(t, one.p, last)
	waitGen(t, all.p, last)
	if a, b := dumpStore(t, one.p), dumpStore(t, all.p); a != b {
		t.Errorf("one record at a time:\n%s\nall at once:\n%s", a, b)
	}
}
