//go:build replymux

package query

import (
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// One reply subscription per connection (<inbox>.*, a callback
// subscription), routing each reply by its last token to the request
// waiting for it.

const replyChanLen = 16

var (
	muxesMu sync.Mutex // guards muxes
	muxes   = map[*nats.Conn]*replyMux{}
)

type replyMux struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	prefix string

	mu      sync.Mutex // guards waiting and next
	waiting map[string]chan *nats.Msg
	next    uint64
}

type replies struct {
	inbox string
	c     <-chan *nats.Msg
	done  func()
}

func awaitReplies(nc *nats.Conn) (replies, error) {
	m, err := muxOf(nc)
	if err != nil {
		return replies{}, err
	}
	c := make(chan *nats.Msg, replyChanLen)
	m.mu.Lock()
	m.next++
	token := strconv.FormatUint(m.next, 36)
	m.waiting[token] = c
	m.mu.Unlock()
	return replies{inbox: m.prefix + token, c: c, done: func() {
		m.mu.Lock()
		delete(m.waiting, token)
		m.mu.Unlock()
	}}, nil
}

func muxOf(nc *nats.Conn) (*replyMux, error) {
	muxesMu.Lock()
	defer muxesMu.Unlock()
	if m := muxes[nc]; m != nil {
		return m, nil
	}
	m := &replyMux{nc: nc, prefix: nc.NewInbox() + ".", waiting: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(m.prefix+"*", m.route)
	if err != nil {
		return nil, err
	}
	m.sub = sub
	// The closed handler runs on the subscription's goroutine, holding no
	// lock of the connection's.
	sub.SetClosedHandler(func(string) { m.close() })
	muxes[nc] = m
	if nc.IsClosed() {
		delete(muxes, nc)
	}
	return m, nil
}

func (m *replyMux) close() {
	muxesMu.Lock()
	defer muxesMu.Unlock()
	if muxes[m.nc] == m {
		delete(muxes, m.nc)
	}
}

func (m *replyMux) route(msg *nats.Msg) {
	token, ok := strings.CutPrefix(msg.Subject, m.prefix)
	if !ok {
		return
	}
	m.mu.Lock()
	c := m.waiting[token]
	m.mu.Unlock()
	if c == nil {
		return
	}
	select {
	case c <- msg:
	default:
	}
}
