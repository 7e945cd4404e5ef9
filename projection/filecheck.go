package projection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt internal/common.Meta), read
// here because bbolt maps pages beyond the end of a truncated file and
// faults on them instead of returning an error.
const (
	boltMagic      = 0xED0CDAED
	boltPageHeader = 16
	boltMetaSize   = 64 // magic … txid, checksum
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64 // high-water mark: pages [0, pgid) are in use
	txid     uint64
}

// checkBoltFile verifies that the file at path has a valid bbolt meta page
// and is at least as long as its high-water mark says, so that opening it
// cannot fault. A missing file passes (it will be created).
func checkBoltFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return fmt.Errorf("%w: %s is empty", ErrCorruptStore, path)
	}
	var best *boltMeta
	m0, err0 := readBoltMeta(f, 0)
	if err0 == nil {
		best = m0
	}
	off := int64(os.Getpagesize())
	if m0 != nil && m0.pageSize > 0 {
		off = int64(m0.pageSize)
	}
	if m1, err1 := readBoltMeta(f, off); err1 == nil && (best == nil || m1.txid > best.txid) {
		best = m1
	}
	if best == nil {
		return fmt.Errorf("%w: %s: no valid meta page (%v)", ErrCorruptStore, path, err0)
	}
	if need := int64(best.pgid) * int64(best.pageSize); fi.Size() < need {
		return fmt.Errorf("%w: %s is %d bytes, its meta page needs %d (truncated)", ErrCorruptStore, path, fi.Size(), need)
	}
	if best.root >= best.pgid || (best.freelist >= best.pgid && best.freelist != ^uint64(0)) {
		return fmt.Errorf("%w: %s: meta page points beyond the high-water mark", ErrCorruptStore, path)
	}
	return nil
}

func readBoltMeta(r io.ReaderAt, off int64) (*boltMeta, error) {
	buf := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := r.ReadAt(buf, off); err != nil {
		return nil, err
	}
	b := buf[boltPageHeader:]
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic {
		return nil, errors.New("bad magic")
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != le.Uint64(b[56:]) {
		return nil, errors.New("bad checksum")
	}
	m := &boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0 {
		return nil, fmt.Errorf("bad page size %d", m.pageSize)
	}
	return m, nil
}
