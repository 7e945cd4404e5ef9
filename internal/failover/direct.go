package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// directBatchSize is how many messages one direct get request asks for.
const directBatchSize = 256

// directGetRequest is the body of a batched direct get
// ($JS.API.DIRECT.GET.<stream>, nats-server 2.11+): up to Batch messages of
// subject NextFor from sequence Seq through UpToSeq.
type directGetRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
	UpToSeq uint64 `json:"up_to_seq"`
}

// Msg is one stored message as Range delivers it.
type Msg struct {
	// Seq is the message's stream sequence.
	Seq uint64
	// Subject is the subject it was published on.
	Subject string
	// Header is its headers (nil when it has none).
	Header nats.Header
	// Data is its payload, as published.
	Data []byte
}

// Range delivers the messages of stream on subject (a filter: wildcards
// allowed) with stream sequences from through to, in order, to fn until fn
// returns false. The last of them, at or before to, must be stored (the
// caller read it from the leader): Range returns only when fn has had it,
// or declined, or a request failed (the error is then the request's; the
// caller resumes after the last message fn had). It is Batch, repeated.
func Range(ctx context.Context, nc *nats.Conn, stream, subject string, from, to uint64, fn func(m Msg) (bool, error)) error {
	next := from
	for next <= to {
		_, more, err := Batch(ctx, nc, stream, subject, next, to, func(m Msg) (bool, error) {
			next = m.Seq + 1
			return fn(m)
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Batch delivers, to fn, one batch of the messages of stream on subject
// with stream sequences from through to (the last of them stored, as for
// Range), in order. It returns how many fn had and whether to ask for more
// (false once fn declined or to was reached).
//
// It reads with a batched direct get, which any replica answers. A replica
// may not have stored yet everything the leader has: a batch that ends
// short of to is continued with one message from the leader (FirstMsg), so
// that a lagging replica costs one leader request per batch and never a
// message.
func Batch(ctx context.Context, nc *nats.Conn, stream, subject string, from, to uint64, fn func(m Msg) (bool, error)) (int, bool, error) {
	next := from
	n, declined, err := directBatch(ctx, nc, stream, subject, from, to, func(m Msg) (bool, error) {
		next = m.Seq + 1
		return fn(m)
	})
	switch {
	case err != nil || declined:
		return n, false, err
	case next > to:
		return n, false, nil
	case n == directBatchSize:
		return n, true, nil
	}
	// The replica that answered ended short of to.
	m, err := FirstMsg(ctx, nc, stream, subject, next)
	if errors.Is(err, jetstream.ErrMsgNotFound) || (err == nil && m.Sequence > to) {
		return n, false, fmt.Errorf("stream %s: the messages of %s from sequence %d to %d are gone", stream, subject, next, to)
	}
	if err != nil {
		return n, false, err
	}
	more, err := fn(Msg{Seq: m.Sequence, Subject: m.Subject, Header: m.Header, Data: m.Data})
	return n + 1, more && m.Sequence < to, err
}

// directBatch fetches one batch of subject's messages from start through
// upTo and hands each to fn. It returns how many were delivered and whether
// fn declined. nats.go v1.55 has no batched direct get, so the request and
// its multi-message reply (ending with a 204 EOB status) are handled here.
func directBatch(ctx context.Context, nc *nats.Conn, stream, subject string, start, upTo uint64,
	fn func(m Msg) (bool, error)) (n int, declined bool, err error) {
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, _ := json.Marshal(directGetRequest{Seq: start, NextFor: subject, Batch: directBatchSize, UpToSeq: upTo})
	req := &nats.Msg{Subject: "$JS.API.DIRECT.GET." + stream, Reply: inbox, Data: body}
	if err := nc.PublishMsg(req); err != nil {
		return 0, false, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204", "404": // end of batch; nothing (more) in range
			return n, false, nil
		case "408", "503":
			return n, false, fmt.Errorf("direct get: status %s %s: %w", status, m.Header.Get("Description"), nats.ErrTimeout)
		default:
			return n, false, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return n, false, fmt.Errorf("direct get: bad %s %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
		}
		n++
		more, err := fn(Msg{Seq: seq, Subject: m.Header.Get(jetstream.SubjectHeader), Header: m.Header, Data: m.Data})
		if err != nil || !more {
			return n, !more, err
		}
		if seq >= upTo {
			return n, false, nil
		}
	}
}
