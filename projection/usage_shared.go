package projection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/usage"
)

// Calls shared across shards (docs/usage.md, "Partitioned projections"). One
// model call can be recorded in several sessions of a tenant: a subagent's
// message in its own file and in its parent's agent_progress mirror, a Codex
// child's replay of its parent's lines, a resumed session's copies. A call's
// key names it (usagekeys), and the session that owns it follows from the
// order of the records that state it. A partitioned projector reads every
// record of the stream: it extracts the keyed calls of the other shards'
// Claude Code and Codex sessions too, keeping only who owns each key — one
// of its own sessions or another shard's, with its direct flag — so that
// every shard decides a key's owner as one projection would, and counts the
// call only while one of its sessions owns it. The shards' reports then add
// up to the one projection's: the query protocol is unchanged.

// foreignSession is what a partitioned projector keeps of another shard's
// session to extract its calls' keys: its tenant, its harness and the
// extraction state between its events. It is stored in usagestate under
// foreignStateKey(id), beside the own sessions' states (ids hold no NUL).
type foreignSession struct {
	Tenant  string      `json:"t"`
	Harness string      `json:"h"`
	State   usage.State `json:"s"`
}

func foreignStateKey(id string) string { return "\x00" + id }

// usageForeign reads a record of another shard's session (tok is its log
// subject's token): its header registers the session, its events' keyed
// calls are decided (usageForeignCall). Most records are passed over without
// parsing: those that state no usage and cannot be a header.
//
// The projector of the session's shard counts the calls of the events its
// fold applies; here the records are taken as they are. They differ only for
// a record that shard refuses (quarantines): an event that breaks its
// session's log, or a retried publish that escaped deduplication.
func (b *batch) usageForeign(r streamRecord, tok string) error {
	header := bytes.Contains(r.data, []byte(`"session"`))
	if !header && !usage.MayStateUsage(r.data) {
		return nil
	}
	key, _ := strings.CutPrefix(r.subject, dshq.LogSubjectPrefix)
	tenant, _, err := record.SplitLogKey(key)
	if err != nil {
		return nil
	}
	id, err := record.ParseSubjectToken(tok)
	if err != nil {
		return nil
	}
	fs, err := b.foreignSession(id)
	if err != nil {
		return err
	}
	if fs == nil {
		if header {
			b.foreignHeader(r, id, tenant, tok)
		}
		return nil
	}
	if fs.Tenant != tenant {
		return nil // a second subject of the id: its shard refuses it
	}
	if fs.Harness != dshq.HarnessClaudeCode && fs.Harness != dshq.HarnessCodex {
		return nil // a deepseek-harness call has no key
	}
	entries := fs.State.Event(fs.Harness, r.data, 0)
	b.usageOf().foreign[id] = fs
	for _, e := range entries {
		if e.Key == "" {
			continue
		}
		if err := b.usageForeignCall(tenant, e); err != nil {
			return err
		}
	}
	return nil
}

// foreignHeader registers another shard's session from the first header
// record of its id, as its shard accepts one: valid, on its id's token.
func (b *batch) foreignHeader(r streamRecord, id, tenant, tok string) {
	h, err := record.ParseHeader(r.data)
	if err != nil || h.Header.ID != id {
		return
	}
	if want, err := record.SubjectToken(id); err != nil || want != tok {
		return
	}
	b.usageOf().foreign[id] = &foreignSession{Tenant: tenant, Harness: h.Header.Harness}
}

// foreignSession returns what the batch or the store keeps of another
// shard's session id, nil when its header was not seen.
func (b *batch) foreignSession(id string) (*foreignSession, error) {
	ub := b.usageOf()
	if fs, ok := ub.foreign[id]; ok {
		return fs, nil
	}
	raw := b.tx.Bucket(bucketUsageStates).Get([]byte(foreignStateKey(id)))
	if raw == nil {
		return nil, nil
	}
	fs := &foreignSession{}
	if err := json.Unmarshal(raw, fs); err != nil {
		return nil, fmt.Errorf("%w: another shard's session %q: usage state: %v", ErrCorruptStore, id, err)
	}
	return fs, nil
}

// usageForeignCall decides the owner of e's key, a call another shard's
// session states, by the rule usageEvent applies to its own: the first
// statement of a key that is not replaced owns it; otherwise the latest,
// except that a mirror never takes a key from a session that stated it
// directly. A call of this shard's that loses its key is no longer counted.
func (b *batch) usageForeignCall(tenant string, e usage.Entry) error {
	kk := append(append([]byte(tenant), 0), e.Key...)
	keys := b.tx.Bucket(bucketUsageKeys)
	if old := keys.Get(kk); old != nil {
		if !e.Replace {
			return nil
		}
		foreign, direct, err := usageKeyOwner(old)
		if err != nil {
			return fmt.Errorf("%w: usage key %q: %v", ErrCorruptStore, e.Key, err)
		}
		if direct && e.Mirror {
			return nil
		}
		if foreign && direct == !e.Mirror {
			return nil // owned as it was
		}
		if !foreign {
			ork, ot, _, err := decodeUsageKey(old)
			if err != nil {
				return fmt.Errorf("%w: usage key %q: %v", ErrCorruptStore, e.Key, err)
			}
			if err := b.usageAdd(ork, ot, -1); err != nil {
				return err
			}
		}
	}
	return keys.Put(kk, encodeForeignUsageKey(!e.Mirror))
}

// finishForeign writes the states of the other shards' sessions the batch
// read.
func (b *batch) finishForeign() error {
	states := b.tx.Bucket(bucketUsageStates)
	for _, id := range sortedKeys(b.usage.foreign) {
		raw, err := json.Marshal(b.usage.foreign[id])
		if err != nil {
			return err
		}
		if err := states.Put([]byte(foreignStateKey(id)), raw); err != nil {
			return err
		}
	}
	return nil
}
