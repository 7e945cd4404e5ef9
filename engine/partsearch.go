package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// The two endpoints below let the query service of a partitioned projection
// answer sessions.search as one shard of the whole corpus does
// (docs/protocol.md, "Partitioned projections"): every shard ranks its
// sessions with the corpus's statistics (sessions.rank), the service merges
// the rankings, stores the merge for later pages and asks each page's hits
// of the shards that hold them (sessions.hits).

// rankSessions answers sessions.rank: the session ranking keySessions
// makes for a first page, every key of the window with its score and time
// and whether this snapshot counts it.
func (e *Engine) rankSessions(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	ix := snap.Index()
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	out := wire.SessionRanking{Keys: []wire.RankedSession{}, MaxResults: e.maxResults, Generation: snap.Generation()}
	if matchesNothing(req.SessionFilters) || matchesNothing(req.EventFilters) {
		return out, nil
	}
	liveIDs := snap.LiveSessions()
	live := make(map[string]bool, len(liveIDs))
	for _, id := range liveIDs {
		live[id] = true
	}
	q := SearchQuery{Phrase: req.Query, SessionFilters: req.SessionFilters, EventFilters: req.EventFilters,
		LiveSessionIDs: liveIDs, AsOf: snap.Generation(), Stats: req.CorpusStats}
	r, err := rankKeys(ctx, e, 0, q, false, ix.RankSessionKeys)
	if err != nil {
		return nil, err
	}
	out.More = r.More
	mirrors := r.mirrors(snap)
	for _, k := range r.Keys {
		drop := false
		if !mirrors {
			info, ok, err := snap.Session(k.SessionID)
			if err != nil {
				return nil, fmt.Errorf("read session %q: %w", k.SessionID, err)
			}
			drop = !ok || info.InvalidFrom >= 0
			if !drop {
				held, err := holdsEvent(snap, k)
				if err != nil {
					return nil, err
				}
				drop = !held
			}
		}
		out.Keys = append(out.Keys, wire.RankedSession{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen,
			Live: live[k.SessionID], Score: k.Score, Time: k.Time, Drop: drop})
	}
	// A window larger than a reply is stored, for the service to read.
	if encodedSize(out)+cursorReserve > e.maxReply {
		id, err := e.storeHits(ctx, out.Keys, 0, nil, searchMeta{})
		if err != nil {
			return nil, err
		}
		var meta searchMeta
		if err := e.load(ctx, id+".m", &meta); err != nil {
			return nil, err
		}
		out.Keys, out.Stored, out.Chunks = []wire.RankedSession{}, id, len(meta.Starts)
	}
	return out, nil
}

// sessionsHits answers sessions.hits: stale when a session of sessionIds
// (the later page's, in this shard) was reclassified after since, or is
// invalid or gone (as continueSearch checks); else the hits of the keys,
// as many as fit the reply.
func (e *Engine) sessionsHits(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	ix := snap.Index()
	var keys []HitKey
	if err := json.Unmarshal(req.Keys, &keys); err != nil {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "keys must be an array of ranked keys: %v", err)
	}
	if snap.Generation() > req.Since {
		for _, id := range req.SessionIDs {
			info, ok, err := snap.Session(id)
			if err != nil {
				return nil, fmt.Errorf("read session %q: %w", id, err)
			}
			if !ok || info.ReclassifiedAt > req.Since || info.InvalidFrom >= 0 {
				return nil, staleCursor()
			}
		}
	}
	out := wire.SessionHits{Items: []*dshq.SessionSearchHit{}, Generation: snap.Generation()}
	if len(keys) == 0 {
		return out, nil
	}
	built, _, err := e.sessionHits(ix, req.Query)(ctx, snap, keys, nil)
	if err != nil {
		return nil, err
	}
	sz := e.sizer(out)
	for _, h := range built {
		if h != nil && !sz.add(*h) {
			break
		}
		out.Items = append(out.Items, h)
	}
	return out, nil
}
