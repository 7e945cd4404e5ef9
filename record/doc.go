// Package record is the codec of dshq's session records: session ids and
// their subject tokens (CONTRACT §1), the header and event records of a
// session log (CONTRACT §2, UPSTREAM §1.2, §2.1), and the upstream JSONL file
// format with its packed chunk rows and zstd framing (UPSTREAM §11).
//
// Decoding is lossless: an event keeps its exact bytes (dshq.Event.Raw), JSON
// numbers are never converted through float64, and anything that could not
// survive a round trip (duplicate keys, -0, invalid UTF-8) is refused with a
// typed error. The package does no I/O of its own beyond the io.Reader and
// io.Writer it is given, and starts no goroutines.
package record
