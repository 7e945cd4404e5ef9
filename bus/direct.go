package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// directBatchSize is how many records one direct get request asks for.
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

// directBatch fetches one batch of subject's records from start through
// upTo and hands each to fn. It returns how many were delivered and whether
// the caller should ask for more (false once fn declines, upTo was reached
// or nothing remains). nats.go v1.55 has no batched direct get, so the
// request and its multi-message reply (ending with a 204 EOB status) are
// handled here.
func (s *Store) directBatch(ctx context.Context, subject string, start, upTo uint64,
	fn func(data []byte, seq uint64) (bool, error)) (int, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.attempt)
	defer cancel()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, err
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(directGetRequest{Seq: start, NextFor: subject, Batch: directBatchSize, UpToSeq: upTo})
	req := &nats.Msg{Subject: "$JS.API.DIRECT.GET." + s.opts.stream.Name, Reply: inbox, Data: body}
	if err := s.nc.PublishMsg(req); err != nil {
		return 0, false, err
	}
	n := 0
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			return n, n == directBatchSize, nil
		case "404": // nothing (more) on the subject in range
			return n, false, nil
		case "408", "503":
			return n, false, fmt.Errorf("direct get: status %s %s: %w", status, m.Header.Get("Description"), nats.ErrTimeout)
		default:
			return n, false, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return n, false, fmt.Errorf("direct get: bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		n++
		more, err := fn(m.Data, seq)
		if err != nil || !more || seq >= upTo {
			return n, false, err
		}
	}
}
