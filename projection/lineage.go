package projection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/index"
)

// A projection's lineage is what it was built from: the session stream —
// its name and its creation time, which JetStream keeps with the stream on
// every replica and across restarts, so that a stream deleted and created
// again under the same name is another one — and the projection's own
// version (SchemaVersion, index.MappingVersion). Two projections of one
// lineage hold the same records at the same generation (the projection is
// a function of the stream), so a cursor means the same on both: cursors
// bind to the lineage (Snapshot.Lineage), not to the build (Epoch). Any
// number of replicas of one stream, and a rebuild of the same stream by
// the same version, continue each other's cursors.

// lineageVersion is the version of the lineage's derivation.
const lineageVersion = "l1"

// lineageOf returns the lineage of a projection of the stream info
// describes: "l1-" and 16 hex digits of a SHA-256 of the stream's name and
// creation time and the projection's versions.
func lineageOf(info *jetstream.StreamInfo) string {
	h := sha256.New()
	for _, part := range []string{lineageVersion, info.Config.Name, info.Created.UTC().Format(time.RFC3339Nano),
		strconv.Itoa(SchemaVersion), index.MappingVersion} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return lineageVersion + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Lineage returns the serving projection's lineage (see above). Until the
// projector has read the stream's info (it does when it opens and whenever
// it creates its consumer) it is "build-" and the epoch: cursors then bind
// to this build alone.
func (p *Projector) Lineage() string {
	if l, ok := p.lineage.Load().(string); ok && l != "" {
		return l
	}
	return "build-" + p.Epoch()
}

// learnLineage records the lineage of the stream info describes.
func (p *Projector) learnLineage(info *jetstream.StreamInfo) {
	if info == nil || info.Created.IsZero() {
		return
	}
	l := lineageOf(info)
	if old, _ := p.lineage.Swap(l).(string); old != l && old != "" {
		p.log.Warn("the session stream is another one than the projection's (created again?)", "lineage", l, "was", old)
	}
}

// readLineage reads the stream's info to learn the lineage, when the
// stream answers within lineageWait.
func (p *Projector) readLineage(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lineageWait)
	defer cancel()
	st, err := p.js.Stream(ctx, p.cfg.stream)
	if err != nil {
		p.log.Debug("cannot read the stream's info yet; the lineage follows with the consumer", "err", err)
		return
	}
	p.learnLineage(st.CachedInfo())
}

// lineageWait bounds how long Open waits for the stream's info.
const lineageWait = 5 * time.Second
