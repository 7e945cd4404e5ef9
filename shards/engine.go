package shards

import (
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/engine"
)

// NewEngine returns the Engine of a partitioned projection's query service
// over its n shards (New): cursors issued with the deployment's key and
// merged searches stored in the cursor bucket, both read from what the
// projectors create, at first use (ReadCursorKey, BindKVCursorStore).
// Serve it with query.Serve and query.WithEngine; close the source when
// the service stopped.
func NewEngine(js jetstream.JetStream, n int, opts ...engine.Option) (*engine.Engine, *Source, error) {
	store, key := BindKVCursorStore(js), ReadCursorKey(js)
	src, err := New(js.Conn(), n, store, key)
	if err != nil {
		return nil, nil, err
	}
	base := []engine.Option{engine.WithCursorStore(store), engine.WithCursorKeyFunc(key)}
	return engine.New(src, append(base, opts...)...), src, nil
}
