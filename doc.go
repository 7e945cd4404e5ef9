// Package dshq is the vocabulary of the dshq session corpus: session headers,
// events, surfaces, titles, filters, the trusted query API's request and reply
// shapes, the closed error taxonomy, every protocol name (names.go), and the
// records a projection holds (SessionInfo, StoredEvent). It imports nothing
// heavy and does no I/O (internal/archtest checks); the packages
// named after what they wrap (bus for NATS, projection for bbolt, index for
// Bleve) implement it.
//
// Wire shapes follow docs/protocol.md and the seed types: field names are the JSON
// names, absent optionals are omitted, and every event keeps the exact bytes it
// was written with (Event.Raw) so that nothing is lost on a round trip.
package dshq
