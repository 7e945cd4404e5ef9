package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"
)

// StreamIdentity identifies one JetStream stream for its whole life: its
// name and the time the server created it (StreamInfo.Created, the same on
// every server of a cluster). A stream deleted and created again under the
// same name, or the same name on another server or cluster, has another
// identity, and its sequences number other records. A projection records
// the identity of the stream it was built from, since its checkpoint and
// generations are sequences of that stream only.
type StreamIdentity struct {
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
}

// IdentityOf returns the identity of the stream info describes.
func IdentityOf(info *jetstream.StreamInfo) StreamIdentity {
	return StreamIdentity{Name: info.Config.Name, Created: info.Created.UTC()}
}

// IdentifyStream returns the identity of the stream name (its info).
func IdentifyStream(ctx context.Context, js jetstream.JetStream, name string) (StreamIdentity, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return StreamIdentity{}, fmt.Errorf("stream %s: %w", name, err)
	}
	return IdentityOf(s.CachedInfo()), nil
}

// IsZero reports whether id identifies no stream.
func (id StreamIdentity) IsZero() bool { return id.Name == "" && id.Created.IsZero() }

// Equal reports whether id and o identify the same stream.
func (id StreamIdentity) Equal(o StreamIdentity) bool {
	return id.Name == o.Name && id.Created.Equal(o.Created)
}

// String returns "<name>@<created, RFC 3339 with nanoseconds, UTC>".
func (id StreamIdentity) String() string {
	return id.Name + "@" + id.Created.UTC().Format(time.RFC3339Nano)
}

// ErrStreamReplaced is wrapped by the failure of a projector whose stream
// was replaced under it (deleted and created again, or another server's):
// its checkpoint counts another stream's records. Run returns it; the
// next Open rebuilds the projection from the new stream.
var ErrStreamReplaced = errors.New("the session stream was replaced")

// metaStream is the meta key of the identity of the stream a store was
// built from (JSON); a store without it was built by an older dshq.
var metaStream = []byte("stream")

// streamIdentity returns the identity the store records, zero if none.
func (s *store) streamIdentity() (StreamIdentity, error) {
	var id StreamIdentity
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMeta).Get(metaStream)
		if b == nil {
			return nil
		}
		if err := json.Unmarshal(b, &id); err != nil {
			return fmt.Errorf("%w: %s: stream identity: %v", ErrCorruptStore, s.path, err)
		}
		return nil
	})
	return id, err
}

// setStreamIdentity records the identity of the stream the store is built
// from.
func (s *store) setStreamIdentity(id StreamIdentity) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaStream, b) })
}

// builtFrom decides whether the store's projection is of stream: it is
// when the store records that stream's identity, and also when it records
// none and has applied nothing (it then records stream's). A store that
// records another stream, or none after applying records (an older dshq
// built it, from a stream nobody can name now), is not: ok is false and
// why says what it records.
func (s *store) builtFrom(stream StreamIdentity) (ok bool, why string, err error) {
	rec, err := s.streamIdentity()
	if err != nil {
		return false, "", err
	}
	if rec.Equal(stream) {
		return true, "", nil
	}
	if !rec.IsZero() {
		return false, "it was built from stream " + rec.String(), nil
	}
	cp, err := s.checkpoint()
	if err != nil {
		return false, "", err
	}
	if cp > 0 {
		return false, "it does not record the stream it was built from", nil
	}
	return true, "", s.setStreamIdentity(stream)
}
