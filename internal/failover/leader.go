package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The stream message get API ($JS.API.STREAM.MSG.GET.<stream>) is answered
// by the stream's leader only, on a cluster. The direct get API (any
// replica answers) may be answered by a follower that has not yet stored
// what the leader acknowledged, so the lookups that decide what a client
// does next — a log's tail, whether a retried publish was stored, whether a
// lease is ours, whether a stored cursor exists — go to the leader.

// msgGetRequest is the body of a stream message get: the last message of a
// subject, or the first message of a subject at or after a sequence.
type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// LastMsg returns the last message of subject in stream, from the stream's
// leader (jetstream.ErrMsgNotFound when there is none; the leader's
// refusals as *jetstream.APIError).
func LastMsg(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return leaderGet(ctx, nc, stream, msgGetRequest{LastFor: subject})
}

// FirstMsg returns the first message of subject at or after stream sequence
// seq in stream, from the stream's leader (errors as LastMsg).
func FirstMsg(ctx context.Context, nc *nats.Conn, stream, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	return leaderGet(ctx, nc, stream, msgGetRequest{Seq: seq, NextFor: subject})
}

func leaderGet(ctx context.Context, nc *nats.Conn, stream string, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	reply, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("message get on %s: %w", stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, resp.Error
	}
	if resp.Message == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	m := resp.Message
	var hdr nats.Header
	if len(m.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, fmt.Errorf("message get on %s: headers: %w", stream, err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: hdr, Data: m.Data, Time: m.Time}, nil
}
