package projection

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/dshq/dshq/index"
)

// A projection's lineage is what it was built from: the session stream —
// its name and its creation time, which JetStream keeps with the stream on
// every replica and across restarts, so that a stream deleted and created
// again under the same name is another one (StreamIdentity, which the
// projection records) — and the projection's own
// version (SchemaVersion, index.MappingVersion). Two projections of one
// lineage hold the same records at the same generation (the projection is
// a function of the stream), so a cursor means the same on both: cursors
// bind to the lineage (Snapshot.Lineage), not to the build (Epoch). Any
// number of replicas of one stream, and a rebuild of the same stream by
// the same version, continue each other's cursors.

// lineageVersion is the version of the lineage's derivation.
const lineageVersion = "l1"

// lineageOf returns the lineage of a projection of stream id built as
// epoch: "l1-" and 16 hex digits of a SHA-256 of the stream's name and
// creation time and the projection's versions; "build-" and the epoch
// while the projection records no stream (it has not bound to one yet):
// cursors then bind to this build alone.
func lineageOf(id StreamIdentity, epoch string) string {
	if id.IsZero() {
		return "build-" + epoch
	}
	h := sha256.New()
	for _, part := range []string{lineageVersion, id.Name, id.Created.UTC().Format(time.RFC3339Nano),
		strconv.Itoa(SchemaVersion), index.MappingVersion} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return lineageVersion + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Lineage returns the serving projection's lineage (see above), from the
// identity of the stream it records it was built from (StreamIdentity).
func (p *Projector) Lineage() string { return lineageOf(p.StreamIdentity(), p.Epoch()) }
