package fold

import (
	"unsafe"

	"github.com/dshq/dshq"
)

// MemSize estimates the bytes the state occupies in memory: the struct, its
// surface's backing array, the title and the open turn's raw data. It is
// what a cache of decoded states should count; the encoded form
// (MarshalBinary) is several times smaller, because it keeps a digest only
// for tool results and writes seqs as deltas.
func (s *State) MemSize() int64 {
	n := int64(unsafe.Sizeof(*s)) + int64(len(s.sessionID)) +
		int64(cap(s.nodes))*int64(unsafe.Sizeof(node{}))
	if t := s.title; t != nil {
		n += int64(unsafe.Sizeof(dshq.Title{})) + int64(len(t.Title)) +
			int64(cap(t.MessageSeqs))*8 + int64(cap(t.Source))
	}
	n += int64(cap(s.turn.turn)) + int64(cap(s.turn.step)) +
		int64(cap(s.turn.pending))*int64(unsafe.Sizeof(pendingCall{}))
	for _, p := range s.turn.pending {
		n += int64(len(p.id)) + int64(cap(p.step))
	}
	return n
}
