package tools

import "context"

type minGenerationKey struct{}

// WithMinGeneration returns a context under which every query the tools make
// is answered by a projection that has applied at least generation g (the
// stream sequence of the caller's last append): read-your-writes for a
// harness that calls a tool right after appending. A projection that does
// not reach g in time fails the call with SESSION_QUERY_NOT_CAUGHT_UP.
func WithMinGeneration(ctx context.Context, g uint64) context.Context {
	return context.WithValue(ctx, minGenerationKey{}, g)
}

// MinGeneration returns the generation set by WithMinGeneration, if any.
func MinGeneration(ctx context.Context) (uint64, bool) {
	g, ok := ctx.Value(minGenerationKey{}).(uint64)
	return g, ok
}
