package query

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// A connection's reply inboxes stay subscribed between requests: a request
// takes an idle one (a new one is subscribed only while all are in use) and
// gives it back when it ends, so that it costs no SUB and no UNSUB. Each
// inbox is a wildcard (<inbox>.*) that a request addresses with a token of
// its own, so that a late reply to an earlier request is told apart and
// dropped, and a channel subscription, which the read loop fills directly:
// roundTrip alone took a p50 of 11 µs so, 12 µs with one callback
// subscription per connection, 17 µs subscribing per request
// (docs/profiling-search.md#the-query-clients-round-trip).

// maxIdleInboxes bounds the inboxes a connection keeps subscribed while
// idle: microhost's DefaultMaxInFlight, the requests a query service
// forwards at once.
const maxIdleInboxes = 256

// replyChanLen is the buffer of an inbox's channel: a request receives a
// few replies at most (a resent one's, no-responders statuses), and a full
// channel drops what arrives (the connection counts a slow consumer).
const replyChanLen = 16

var (
	inboxesMu sync.Mutex // guards inboxes
	inboxes   = map[*nats.Conn]*inboxPool{}
)

// inboxPool is one connection's idle reply inboxes. It leaves inboxes (and
// a later request on the connection finds none) when the connection closes:
// the first of its inboxes' subscriptions to close takes it out.
type inboxPool struct {
	nc *nats.Conn

	mu     sync.Mutex // guards idle and closed
	idle   []*inbox
	closed bool
}

// inbox is one subscribed reply inbox.
type inbox struct {
	pool    *inboxPool
	sub     *nats.Subscription
	prefix  string // the subscription's subject without its last token
	c       chan *nats.Msg
	n       uint64      // the token of the holder's request; only the holder uses it
	retired atomic.Bool // unsubscribed by the pool, not by the connection closing
}

// replies receives the replies to one request: those sent to inbox arrive
// on c, among late replies to earlier requests (another subject), which
// the receiver drops. done gives the inbox back; it must be called once
// the request ends.
type replies struct {
	inbox string
	c     <-chan *nats.Msg
	done  func()
}

// awaitReplies returns an inbox of nc's for one request.
func awaitReplies(nc *nats.Conn) (replies, error) {
	p := poolOf(nc)
	in := p.take()
	if in == nil {
		var err error
		if in, err = p.subscribe(); err != nil {
			return replies{}, err
		}
	}
	in.drop()
	in.n++
	return replies{inbox: in.prefix + strconv.FormatUint(in.n, 36), c: in.c, done: in.give}, nil
}

// poolOf returns nc's pool, made on first use.
func poolOf(nc *nats.Conn) *inboxPool {
	inboxesMu.Lock()
	defer inboxesMu.Unlock()
	p := inboxes[nc]
	if p == nil {
		p = &inboxPool{nc: nc}
		inboxes[nc] = p
	}
	return p
}

// take returns an idle inbox, or nil.
func (p *inboxPool) take() *inbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	in := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	return in
}

// subscribe subscribes a new inbox. The subscription's closed handler runs
// under the connection's locks (a channel subscription's does): it takes
// only inboxesMu and p.mu, which are never held while calling into the
// connection.
func (p *inboxPool) subscribe() (*inbox, error) {
	in := &inbox{pool: p, prefix: p.nc.NewInbox() + ".", c: make(chan *nats.Msg, replyChanLen)}
	sub, err := p.nc.ChanSubscribe(in.prefix+"*", in.c)
	if err != nil {
		if p.nc.IsClosed() || p.nc.IsDraining() {
			p.close()
		}
		return nil, err
	}
	in.sub = sub
	sub.SetClosedHandler(func(string) {
		if !in.retired.Load() {
			p.close()
		}
	})
	// The connection may have closed before the handler was set.
	if p.nc.IsClosed() {
		p.close()
	}
	return in, nil
}

// close takes p out of inboxes: its connection closed.
func (p *inboxPool) close() {
	inboxesMu.Lock()
	if inboxes[p.nc] == p {
		delete(inboxes, p.nc)
	}
	inboxesMu.Unlock()
	p.mu.Lock()
	p.closed = true
	p.idle = nil
	p.mu.Unlock()
}

// drop discards the replies waiting in the inbox: late ones of its
// earlier requests.
func (in *inbox) drop() {
	for {
		select {
		case <-in.c:
		default:
			return
		}
	}
}

// give returns the inbox to its pool, or unsubscribes it when the pool
// has enough idle ones.
func (in *inbox) give() {
	in.drop()
	if !in.sub.IsValid() {
		return
	}
	p := in.pool
	p.mu.Lock()
	keep := !p.closed && len(p.idle) < maxIdleInboxes
	if keep {
		p.idle = append(p.idle, in)
	}
	p.mu.Unlock()
	if !keep {
		in.retired.Store(true)
		_ = in.sub.Unsubscribe()
	}
}
