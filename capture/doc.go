// Package capture is what dshq's converters of other harnesses' session
// files share (docs/harnesses.md): a file's Lines (terminators kept, a torn
// last line held), the Converter that turns them into session-log Updates
// prefix-stably (packages claudecode and codex implement it), the capture
// member every converted event carries, Source, which writes the original
// file back byte for byte from a converted log, and Detect, which tells a
// file's format.
//
// Everything here is pure: values in, values out, no I/O, no goroutines.
// Importing, watching and exporting files (which read and write them) are
// the callers' business.
package capture
