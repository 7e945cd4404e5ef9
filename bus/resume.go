package bus

import (
	"context"

	"github.com/dshq/dshq"
)

// Resume balances a crashed writer's log through write handle h: when the log's
// last turn never ended, it appends the crash closers computed by the fold
// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view: a synthetic
// tool/result per unanswered tool call, a step/end if a step is open, then
// turn/end interrupted) and returns the stream sequence of the last record. A
// balanced log gets nothing and the current last sequence is returned. Errors
// are those of Append.
func Resume(ctx context.Context, h *Handle) (uint64, error) {
	closers, last, err := h.closers()
	if err != nil || len(closers) == 0 {
		return last, err
	}
	return h.Append(ctx, closers)
}

// closers returns the crash closers of the handle's log and its last stream
// sequence.
func (h *Handle) closers() ([]dshq.Event, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, 0, h.closedErr("resume")
	}
	if h.access != Write {
		return nil, 0, errorf(ErrReadOnly, h.id, "session %q is open read-only: resume refused", h.id)
	}
	return h.state.Closers(), h.lastStreamSeq, nil
}
