package projection

import (
	"container/list"

	"github.com/dshq/dshq/fold"
)

// stateCache keeps decoded fold states, with their sessions' stored values,
// in memory within a byte budget, evicting the least recently used. The
// size of an entry is its memory (cacheCost): the decoded state, the
// session value, its id and the cache's own bookkeeping.
// Only the writer holding Projector.writeMu uses it, so it has no lock of
// its own. The stored bytes in bbolt are the truth: an evicted state is
// restored from them.
type stateCache struct {
	budget int64
	used   int64
	order  *list.List               // front = most recently used
	items  map[string]*list.Element // id → element holding *cacheEntry
}

type cacheEntry struct {
	id    string
	state *fold.State
	value *sessionValue
	size  int64
}

// cacheEntryOverhead is the memory of one entry's bookkeeping: the list
// element, the cacheEntry and its map slot.
const cacheEntryOverhead = 160

// cacheCost is the memory an entry for id's state and value occupies.
func cacheCost(id string, st *fold.State, v *sessionValue) int64 {
	return st.MemSize() + int64(len(id)) + cacheEntryOverhead + v.memSize()
}

func newStateCache(budget int64) *stateCache {
	return &stateCache{budget: budget, order: list.New(), items: map[string]*list.Element{}}
}

// get returns the cached state and session value of id.
func (c *stateCache) get(id string) (*fold.State, *sessionValue, bool) {
	el, ok := c.items[id]
	if !ok {
		return nil, nil, false
	}
	c.order.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.state, e.value, true
}

// put caches st and v for id with the given size, evicting as needed. An
// entry larger than the whole budget is not cached.
func (c *stateCache) put(id string, st *fold.State, v *sessionValue, size int64) {
	c.remove(id)
	if size > c.budget {
		return
	}
	c.items[id] = c.order.PushFront(&cacheEntry{id: id, state: st, value: v, size: size})
	c.used += size
	for c.used > c.budget {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.items, e.id)
		c.used -= e.size
	}
}

// remove drops id's state (after a failed batch, or when it became invalid).
func (c *stateCache) remove(id string) {
	if el, ok := c.items[id]; ok {
		c.used -= el.Value.(*cacheEntry).size
		c.order.Remove(el)
		delete(c.items, id)
	}
}

// bytes returns the bytes in use.
func (c *stateCache) bytes() int64 { return c.used }

// len returns the number of cached states.
func (c *stateCache) len() int { return len(c.items) }
