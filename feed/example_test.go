package feed_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/record"
)

// A UI follows on from a query reply of generation gen: it tails its
// workspace after that generation, and resynchronises when the feed no
// longer holds what it missed.
func ExampleTail() {
	ctx := context.Background()
	nc, err := nats.Connect(nats.DefaultURL, nats.CustomInboxPrefix("_INBOX_ui"))
	if err != nil {
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	var gen uint64 = 1234 // the generation of the query reply the UI shows
	cwd := "/home/u/proj"
	f := feed.Filter{Workspace: record.WorkspaceKey(&cwd), Kinds: []feed.Kind{feed.KindSession, feed.KindTitle, feed.KindLease}}
	sub, err := feed.Tail(ctx, js, f, feed.AfterGeneration(gen))
	if errors.Is(err, feed.ErrNotRetained) {
		// Too old: query again, then follow on from the new reply.
		return
	}
	if err != nil {
		return
	}
	defer sub.Stop()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return
		}
		fmt.Println(m.Generation, m.Kind, m.SessionID)
	}
}
