package projection

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"

	bolt "go.etcd.io/bbolt"
)

// refeedChunk bounds the documents re-fed to the index in one Apply.
const refeedChunk = 4096

// refeedIndex brings an index that is behind the store up to the store's
// checkpoint: every session changed after the index's generation has its
// documents deleted and re-inserted from the store. An index at or ahead of
// the store needs nothing: replaying the stream from the store's checkpoint
// reproduces what it already holds.
func (p *Projector) refeedIndex(ctx context.Context, inst *instance) error {
	ig := inst.index.Generation()
	cp, err := inst.store.checkpoint()
	if err != nil {
		return err
	}
	inst.indexGen = ig
	if ig >= cp {
		return nil
	}
	p.log.Info("re-feeding index from the store", "indexGeneration", ig, "checkpoint", cp)
	pending := &index.Batch{}
	flush := func(gen uint64) error {
		if err := inst.index.Apply(ctx, pending, gen); err != nil {
			return fmt.Errorf("re-feed index: %w", err)
		}
		pending = &index.Batch{}
		return nil
	}
	err = inst.store.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketSessions).ForEach(func(k, raw []byte) error {
			var v sessionValue
			if err := json.Unmarshal(raw, &v); err != nil {
				return fmt.Errorf("%w: session %q: %v", ErrCorruptStore, k, err)
			}
			if v.UpdatedAt <= ig {
				return nil
			}
			pending.DeleteSession(v.Header.ID)
			if v.InvalidFrom < 0 {
				if err := appendDocs(tx, &v, pending); err != nil {
					return err
				}
			}
			if pending.Len() >= refeedChunk {
				return flush(ig) // not yet complete: keep the old generation
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if err := flush(cp); err != nil {
		return err
	}
	inst.indexGen = cp
	return nil
}

// appendDocs adds the documents of a valid session to ib.
func appendDocs(tx *bolt.Tx, v *sessionValue, ib *index.Batch) error {
	s := &snapshot{tx: tx}
	return s.Events(v.Header.ID, 0, func(e dshq.StoredEvent) bool {
		if e.Text != "" && !e.Invalid {
			d := indexDoc(v, dshq.SearchDocument{EventRecord: e.Record, Text: e.Text})
			d.Generation = e.StreamSeq // when it was first searchable, not now
			ib.Upsert(d)
		}
		return true
	})
}
