package projection

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/internal/lifecycle"
)

// leaseRetry is how long the lease follower waits before retrying a missing
// bucket or a failed watch.
const leaseRetry = time.Second

// watchLeases follows the lease bucket until ctx ends: a key present means
// the session with that log key is live. A key's lease lapses when it
// is deleted or purged (including the server's MaxAge markers) or, for a
// bucket with a TTL, when no put renewed it within the TTL.
func (p *Projector) watchLeases(ctx context.Context) error {
	for ctx.Err() == nil {
		kv, err := p.js.KeyValue(ctx, p.cfg.leaseBucket)
		if err != nil {
			if !errors.Is(err, jetstream.ErrBucketNotFound) {
				p.log.Warn("lease bucket unavailable; retrying", "bucket", p.cfg.leaseBucket, "err", err)
			}
			if lifecycle.Sleep(ctx, leaseRetry) != nil {
				return nil
			}
			continue
		}
		if err := p.followLeases(ctx, kv); err != nil && ctx.Err() == nil {
			p.log.Warn("lease watch failed; retrying", "err", err)
			if lifecycle.Sleep(ctx, leaseRetry) != nil {
				return nil
			}
		}
	}
	return nil
}

func (p *Projector) followLeases(ctx context.Context, kv jetstream.KeyValue) error {
	status, err := kv.Status(ctx)
	if err != nil {
		return err
	}
	ttl := status.TTL()
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return err
	}
	defer stopWatch(w)
	expires := map[string]time.Time{} // lease key → lapse time, when the bucket has a TTL
	initial := map[string]bool{}      // log keys seen while the watch replays current values; nil after
	sweep := time.NewTicker(sweepInterval(ttl))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("lease watch closed")
			}
			if e == nil {
				// Current values replayed: a lease held before this watch
				// began (a re-watch) and absent now has lapsed meanwhile.
				p.dropLeasesExcept(initial)
				initial = nil
				continue
			}
			if initial != nil && e.Operation() == jetstream.KeyValuePut {
				initial[logKeyOfLeaseKey(e.Key())] = true
			}
			live := e.Operation() == jetstream.KeyValuePut
			if live && ttl > 0 {
				expires[e.Key()] = e.Created().Add(ttl)
				if time.Now().After(expires[e.Key()]) {
					live = false
				}
			}
			if !live {
				delete(expires, e.Key())
			}
			p.setLive(logKeyOfLeaseKey(e.Key()), live)
		case now := <-sweep.C:
			for key, at := range expires {
				if now.After(at) {
					delete(expires, key)
					p.setLive(logKeyOfLeaseKey(key), false)
				}
			}
		}
	}
}

// logKeyOfLeaseKey inverts the lease key mapping of package bus (LeaseKey):
// a lease key is the session's log key (its subject token, or
// <tenant>.<token>), except that key-value keys may not hold "~", so an
// encoded token's leading "~" is written as "=".
func logKeyOfLeaseKey(key string) string {
	tenant, tok, tenanted := strings.Cut(key, ".")
	if !tenanted {
		tenant, tok = "", key
	}
	if strings.HasPrefix(tok, "=") {
		tok = "~" + tok[1:]
	}
	if !tenanted {
		return tok
	}
	return tenant + "." + tok
}

func sweepInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 || ttl > 4*time.Second {
		return time.Second
	}
	return ttl / 4
}

// dropLeasesExcept marks every live log key not in keep as lapsed.
func (p *Projector) dropLeasesExcept(keep map[string]bool) {
	p.liveMu.RLock()
	var gone []string
	for key := range p.live {
		if !keep[key] {
			gone = append(gone, key)
		}
	}
	p.liveMu.RUnlock()
	for _, key := range gone {
		p.setLive(key, false)
	}
}

// setLive records the lease state of a log key; a change bumps the live
// version and is delivered to the OnCommit hook.
func (p *Projector) setLive(key string, live bool) {
	p.liveMu.Lock()
	if p.live[key] == live {
		p.liveMu.Unlock()
		return
	}
	if live {
		p.live[key] = true
	} else {
		delete(p.live, key)
	}
	p.liveVersion++
	p.liveMu.Unlock()
	if p.cfg.onCommit == nil {
		return
	}
	// Serialized with batch commits, so the hook sees one ordered feed.
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	inst := p.current()
	if inst == nil {
		return
	}
	c := Commit{Generation: p.Generation(), Epoch: inst.store.epoch, Leases: []LeaseChange{{Key: key, Live: live}}}
	_ = inst.store.db.View(func(tx *bolt.Tx) error {
		if id := tx.Bucket(bucketTokens).Get([]byte(key)); id != nil {
			c.Leases[0].SessionID = string(id)
		}
		return nil
	})
	p.cfg.onCommit(c)
}

// stopWatch stops w and drains its updates. The watcher's message handler
// blocks sending to Updates when its buffer is full (many lease changes at
// once), and closes it only once that send returns: without the drain the
// handler's goroutine never ends.
//
// Updates is closed by the subscription's closed handler, which nats.go's
// WatchAll sets only after it subscribed. A watch whose context ends while
// WatchAll runs can be unsubscribed by nats.go (it unsubscribes a watch
// when its context ends) before that handler is set, and then Updates is
// never closed: a loaded CI run hung for good in a drain that waited for
// it. So only a Stop that removed the subscription itself (nil: the
// handler was set, since WatchAll had returned) waits for the close; a
// Stop that found it closed already empties what is buffered, so that a
// handler in the middle of a send returns, and goes: a closed
// subscription delivers nothing more.
func stopWatch(w jetstream.KeyWatcher) {
	if err := w.Stop(); err == nil {
		for range w.Updates() {
		}
		return
	}
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		default:
			return
		}
	}
}
