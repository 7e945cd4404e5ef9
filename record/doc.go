// Package record is the codec of dshq's session records: session ids and their
// subject tokens
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys), tenant names
// and log keys (the part of a log subject after dsh.log.), the header and event
// records of a session log (docs/events-and-surfaces.md#session-headers,
// docs/events-and-surfaces.md#the-event-envelope), and the upstream JSONL file
// format with its packed chunk rows and zstd framing (docs/file-format.md).
//
// Decoding is lossless: an event keeps its exact bytes (dshq.Event.Raw,
// compacted: insignificant whitespace dropped, every token, escape and key
// order kept), JSON numbers are never converted through float64, and
// anything that could not survive a round trip is refused: invalid JSON or
// UTF-8, duplicate object keys (compared by decoded value), -0 in any
// spelling, numbers beyond a double, nesting deeper than MaxDepth, records
// over DefaultMaxRecordBytes (64 MiB). Which envelope keys and surface rules
// an event must obey is package fold's to check.
//
// Errors: ids, subject tokens, tenant names and log keys give a *dshq.Error
// with code SESSION_QUERY_INVALID_REQUEST wrapping ErrInvalidSessionID,
// ErrInvalidSubjectToken or ErrInvalidTenant; everything else gives a *RecordError with a stable
// Rule, the file (WithName) and the physical line (the header is line 1;
// the original's messages count from the line after the header).
//
// Reading a file (Reader) is strict by default, which is what an import
// wants: a torn tail, an unparsable line, a malformed row or a seq gap is an
// error naming the line. WithUpstreamTail gives the original's crash-tail
// tolerance instead (docs/file-format.md#reading-and-torn-lines). A .jsonl.zstd
// file (docs/file-format.md#zstandard-framing) is read frame by
// frame: each frame is scanned structurally (magic, reserved bits, block
// headers; skippable frames are refused), held compressed (at most
// MaxZstdFrameBytes) and decompressed with its checksum verified and a
// bounded window; the first frame must hold exactly the header line, and no
// line may span two frames. A torn final frame is an error, or in upstream
// mode the end of the input, keeping the complete lines the decoder
// recovers from it (those of its complete blocks); damage inside a complete
// frame is fatal in both modes. WithStandardZstd reads any zstd stream
// instead, as the zstd tool writes it (lines may span frames).
//
// The package does no I/O of its own beyond the io.Reader and io.Writer it
// is given, and starts no goroutines (the zstd coders run synchronously).
package record
