package query

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/projection"
)

// NewShardEngine returns the Engine a projector process hosts: reads from
// p's snapshots, search through p's index, and paged search hits kept in the
// JetStream KV bucket dshq.CursorBucket so that any replica can continue a
// cursor. Serve it with ServeShard.
func NewShardEngine(ctx context.Context, js jetstream.JetStream, p *projection.Projector, opts ...EngineOption) (*Engine, error) {
	store, err := NewKVCursorStore(ctx, js)
	if err != nil {
		return nil, err
	}
	base := []EngineOption{WithSearcher(FromIndexFunc(p.Index)), WithCursorStore(store)}
	return NewEngine(FromProjector(p), append(base, opts...)...), nil
}
