package projection

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A snapshot held open (a reader that waits on something slow while it
// reads) never stops the projector: its commits grow the store's file far
// past its size at the snapshot, and readers that come after are answered.
// Before, bbolt remapped the file on the first commit that outgrew the
// mapping; a remap waits for every open read transaction, so the projector
// stalled for as long as the snapshot was held, and every later View
// waited behind that commit: one slow request froze the projection.
func TestAHeldSnapshotStallsNeitherTheProjectorNorOtherReaders(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.start(dir)
	tok := token(t, "held")
	waitGen(t, r.p, e.publish(tok, []byte(`{"type":"session","version":2,"id":"held","createdAt":1,"isSeeded":false}`)))
	before := storeSize(t, dir)

	held, release := make(chan struct{}), make(chan struct{})
	viewDone := make(chan error, 1)
	go func() {
		viewDone <- r.p.View(t.Context(), 0, func(Snapshot) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	// About 4 MB of distinct text (the raw records are compressed, so it
	// must not repeat): the file grows well past any mapping of a store
	// this small (bbolt maps the next power of two above the file).
	recs := make([][2]string, 0, 1000)
	for i := range 1000 {
		var b strings.Builder
		for j := range 120 {
			fmt.Fprintf(&b, "w%x%x ", i*7919+j*104729, (i+1)*(j+3)*2654435761)
		}
		recs = append(recs, [2]string{tok, fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}`,
			i, i+2, i, b.String())})
	}
	last := e.publishAsync(recs)
	// The hang guard of waitGen is the failure before the fix: the
	// projector never reached the end while the snapshot was held.
	waitGenWithin(t, r.p, last, 2*time.Minute)
	var events int64
	view(t, r.p, func(s Snapshot) error {
		info, ok := s.Session("held")
		if !ok {
			return fmt.Errorf("session held is missing")
		}
		events = info.EventCount
		return nil
	})
	if events != int64(len(recs)) {
		t.Fatalf("a reader after the held snapshot sees %d events, want %d", events, len(recs))
	}
	after := storeSize(t, dir)
	if after < 8*before || after < 2<<20 {
		t.Fatalf("the store grew from %d to %d bytes: too little to have needed a remap before the fix", before, after)
	}
	close(release)
	if err := <-viewDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("the store grew from %d to %d bytes while a snapshot was held", before, after)
}

// storeSize is the size of the serving projection's store file under dir.
func storeSize(t *testing.T, dir string) int64 {
	t.Helper()
	var size int64
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Name() == "projection.db" {
			size = max(size, info.Size())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return size
}
