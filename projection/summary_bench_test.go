package projection

import (
	"fmt"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

// BenchmarkListPage measures one list page (50 sessions) read from a
// snapshot in each order, from the start and from the middle of the
// corpus, over corpora of 1 000 and 20 000 sessions: a page walks an order
// bucket from its key, so its cost does not grow with the corpus.
// Run it with: go test -run '^$' -bench ListPage -benchtime 2000x ./projection
func BenchmarkListPage(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		e := newEnv(b)
		recs := make([][2]string, 0, 2*n)
		for i := range n {
			id := fmt.Sprintf("s-%06d", i)
			tok := token(b, id)
			// Activity in another order than creation: every seventh
			// session is the latest active.
			act := int64(2_000_000 + (i*7919)%n)
			recs = append(recs,
				[2]string{tok, fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":%d,"isSeeded":false}`, id, 1_000_000+i)},
				[2]string{tok, fmt.Sprintf(`{"type":"turn/start","seq":0,"time":%d,"data":{"turn":1}}`, act)})
		}
		last := e.publishAsync(recs)
		r := e.start(b.TempDir())
		waitGenWithin(b, r.p, last, 10*time.Minute)
		for _, o := range []dshq.ListOrder{dshq.OrderCreatedDesc, dshq.OrderActivityDesc, dshq.OrderActivityAsc} {
			var mid []byte
			view(b, r.p, func(s Snapshot) error {
				i := 0
				return s.SessionsInOrder(o, nil, func(info dshq.SessionInfo) bool {
					if i++; i == n/2 {
						mid = o.Key(info)
						return false
					}
					return true
				})
			})
			for _, from := range []struct {
				name string
				key  []byte
			}{{"start", nil}, {"middle", mid}} {
				b.Run(fmt.Sprintf("sessions=%d/%s/%s", n, o, from.name), func(b *testing.B) {
					for range b.N {
						view(b, r.p, func(s Snapshot) error {
							got := 0
							err := s.SessionsInOrder(o, from.key, func(dshq.SessionInfo) bool {
								got++
								return got < 50
							})
							if got != 50 {
								b.Fatalf("a page of %d sessions", got)
							}
							return err
						})
					}
				})
			}
		}
		r.stop()
	}
}
