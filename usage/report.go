package usage

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SlotMillis is the time resolution of the stored rows: 15 minutes, the
// largest step every time zone's offset is a multiple of, so a day, week
// or month in any zone is a whole number of slots.
const SlotMillis = 15 * 60 * 1000

// SlotOf is the slot holding Unix ms t (slots before 1970 clamp to 0).
func SlotOf(t int64) uint32 {
	if t <= 0 {
		return 0
	}
	s := t / SlotMillis
	if s > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(s)
}

// SlotTime is the start of slot s.
func SlotTime(s uint32) time.Time { return time.UnixMilli(int64(s) * SlotMillis).UTC() }

// Row is one stored aggregate: what one session spent with one model on
// one branch within one slot.
type Row struct {
	Slot    uint32
	Session string
	Model   string
	Branch  string
	Tokens
}

// SessionDims are the dimensions of a session that spent: from its
// header and its log subject.
type SessionDims struct {
	Cwd     string
	Machine string
	Harness string
	Tenant  string
	// Ancestors are its parent, the parent's parent… (nearest first).
	Ancestors []string
}

// Root is the session's outermost ancestor (itself when it has none).
func (d SessionDims) Root(id string) string {
	if n := len(d.Ancestors); n > 0 {
		return d.Ancestors[n-1]
	}
	return id
}

// Dimension is what a report groups by.
type Dimension string

// The dimensions (docs/usage.md).
const (
	Day     Dimension = "day"
	Week    Dimension = "week"
	Month   Dimension = "month"
	Session Dimension = "session"
	Project Dimension = "project" // the workspace (cwd)
	Branch  Dimension = "branch"
	Model   Dimension = "model"
	Harness Dimension = "harness"
	Tenant  Dimension = "tenant"
	Machine Dimension = "machine"
)

// Dimensions lists every dimension.
var Dimensions = []Dimension{Day, Week, Month, Session, Project, Branch, Model, Harness, Tenant, Machine}

func (d Dimension) isTime() bool { return d == Day || d == Week || d == Month }

// Query selects and groups rows. Empty filter lists match everything; a
// list's values are ORed, the lists ANDed.
type Query struct {
	// Since and Until bound the calls' times, [Since, Until); zero is open.
	Since, Until time.Time
	// Location is the time zone of days, weeks (from Monday) and months.
	Location *time.Location
	Cwds     []string // exact workspaces
	Prefixes []string // workspace prefixes (a path and everything under it)
	Harness  []string
	Machines []string
	Branches []string
	Models   []string
	Tenants  []string
	// Sessions keeps the calls of these sessions (and, with Rollup, of
	// their descendants).
	Sessions []string
	GroupBy  []Dimension
	// Rollup attributes a session's calls to its root ancestor for the
	// session dimension and the Sessions filter.
	Rollup bool
	// Limit is the most rows a report holds (0: all).
	Limit int
}

// SlotRange is the range of slots [from, to] that can hold q's calls.
func (q Query) SlotRange() (from, to uint32) {
	from, to = 0, 1<<32-1
	if !q.Since.IsZero() {
		from = SlotOf(q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		u := q.Until.UnixMilli() - 1
		if u < 0 {
			return 1, 0
		}
		to = SlotOf(u)
	}
	return from, to
}

// ModelBreakdown is one model's part of a report row.
type ModelBreakdown struct {
	ModelName string `json:"modelName"`
	Tokens
	// Cost is nil for a model the pricing table does not price.
	Cost *float64 `json:"cost"`
}

// ReportRow is one group: its key, its sums and its models. Period is
// the label of the first grouped dimension (a day, week or month for time
// groups, else the session id, workspace, branch…): what ccusage's rows
// call period.
type ReportRow struct {
	Period    string  `json:"period"`
	Day       string  `json:"day,omitempty"`
	Week      string  `json:"week,omitempty"`
	Month     string  `json:"month,omitempty"`
	SessionID *string `json:"sessionId,omitempty"`
	Project   *string `json:"project,omitempty"`
	Branch    *string `json:"branch,omitempty"`
	Model     *string `json:"model,omitempty"`
	Harness   *string `json:"harness,omitempty"`
	Tenant    *string `json:"tenant,omitempty"`
	Machine   *string `json:"machine,omitempty"`
	Totals
	ModelsUsed      []string         `json:"modelsUsed"`
	ModelBreakdowns []ModelBreakdown `json:"modelBreakdowns"`
}

// Totals are sums in ccusage's field names. TotalCost is the cost of the
// priced models (nil when none is priced); UnpricedModels names the
// others, whose cost is unknown.
type Totals struct {
	Tokens
	TotalTokens    int64    `json:"totalTokens"`
	TotalCost      *float64 `json:"totalCost"`
	Calls          int64    `json:"calls"`
	UnpricedModels []string `json:"unpricedModels,omitempty"`
}

// Report is a usage report.
type Report struct {
	GroupBy   []Dimension `json:"groupBy"`
	TimeZone  string      `json:"timeZone"`
	Rows      []ReportRow `json:"rows"`
	Totals    Totals      `json:"totals"`
	Truncated bool        `json:"truncated,omitempty"`
	// PriceSource and PriceDate state where the prices came from.
	PriceSource string `json:"priceSource"`
	PriceDate   string `json:"priceDate"`
}

// Aggregator sums rows into a report.
type Aggregator struct {
	q        Query
	prices   *Prices
	from, to uint32
	groups   map[string]*group
	// periods memoizes the day, week and month labels of a slot.
	periods  map[uint32]*[3]string
	sessions map[string]bool
	key      []byte // scratch
	labels   []string
	// kept are the groups flush moved out of groups (at most Limit);
	// dropped says whether it dropped any; total sums every group's models.
	kept    *groupHeap
	dropped bool
	total   map[string]*Tokens
	memo    *Prices // prices, memoized
}

type group struct {
	row    ReportRow
	key    string
	models []modelTokens // few: a slice is cheaper than a map
}

type modelTokens struct {
	model string
	Tokens
}

func (g *group) modelMap() map[string]*Tokens {
	m := make(map[string]*Tokens, len(g.models))
	for i := range g.models {
		m[g.models[i].model] = &g.models[i].Tokens
	}
	return m
}

// NewAggregator returns an aggregator of q's rows priced by prices.
func NewAggregator(q Query, prices *Prices) *Aggregator {
	if q.Location == nil {
		q.Location = time.Local
	}
	a := &Aggregator{q: q, prices: prices, groups: map[string]*group{}, periods: map[uint32]*[3]string{},
		memo: prices.memo(), total: map[string]*Tokens{}}
	byTime := len(q.GroupBy) > 0 && q.GroupBy[0].isTime()
	a.kept = &groupHeap{order: func(x, y *group) int {
		return cmp.Or(compareTotals(&x.row, &y.row, byTime), cmp.Compare(x.key, y.key))
	}}
	a.from, a.to = q.SlotRange()
	if len(q.Sessions) > 0 {
		a.sessions = map[string]bool{}
		for _, s := range q.Sessions {
			a.sessions[s] = true
		}
	}
	return a
}

// Add counts r, a row of a session with dims d, when q selects it.
func (a *Aggregator) Add(r Row, d SessionDims) {
	q := &a.q
	if r.Slot < a.from || r.Slot > a.to {
		return
	}
	if !match(q.Harness, d.Harness) || !match(q.Machines, d.Machine) || !match(q.Branches, r.Branch) ||
		!match(q.Models, r.Model) || !match(q.Tenants, d.Tenant) || !match(q.Cwds, d.Cwd) || !prefixMatch(q.Prefixes, d.Cwd) {
		return
	}
	if a.sessions != nil && !a.sessions[r.Session] {
		in := false
		if q.Rollup {
			for _, anc := range d.Ancestors {
				if a.sessions[anc] {
					in = true
					break
				}
			}
		}
		if !in {
			return
		}
	}
	a.key, a.labels = a.key[:0], a.labels[:0]
	for _, dim := range q.GroupBy {
		label := a.label(dim, r, d)
		a.labels = append(a.labels, label)
		a.key = append(append(a.key, label...), 0)
	}
	g := a.groups[string(a.key)]
	if g == nil {
		k := string(a.key)
		g = &group{row: a.newRow(), key: k}
		a.groups[k] = g
	}
	for i := range g.models {
		if g.models[i].model == r.Model {
			g.models[i].Add(r.Tokens)
			return
		}
	}
	g.models = append(g.models, modelTokens{r.Model, r.Tokens})
}

// newRow is the row of the group whose labels are a.labels.
func (a *Aggregator) newRow() ReportRow {
	var row ReportRow
	for i, dim := range a.q.GroupBy {
		label := a.labels[i]
		if i == 0 {
			row.Period = label
		}
		switch dim {
		case Day:
			row.Day = label
		case Week:
			row.Week = label
		case Month:
			row.Month = label
		case Session:
			row.SessionID = &label
		case Project:
			row.Project = &label
		case Branch:
			row.Branch = &label
		case Model:
			row.Model = &label
		case Harness:
			row.Harness = &label
		case Tenant:
			row.Tenant = &label
		case Machine:
			row.Machine = &label
		}
	}
	return row
}

func (a *Aggregator) label(dim Dimension, r Row, d SessionDims) string {
	switch dim {
	case Day:
		return a.period(r.Slot)[0]
	case Week:
		return a.period(r.Slot)[1]
	case Month:
		return a.period(r.Slot)[2]
	case Session:
		if a.q.Rollup {
			return d.Root(r.Session)
		}
		return r.Session
	case Project:
		return d.Cwd
	case Branch:
		return r.Branch
	case Model:
		return r.Model
	case Harness:
		return d.Harness
	case Tenant:
		return d.Tenant
	case Machine:
		return d.Machine
	}
	return ""
}

// period returns the day, the week (its Monday) and the month holding
// slot s in the query's zone.
func (a *Aggregator) period(s uint32) *[3]string {
	if p, ok := a.periods[s]; ok {
		return p
	}
	t := SlotTime(s).In(a.q.Location)
	y, m, dd := t.Date()
	day := time.Date(y, m, dd, 0, 0, 0, 0, a.q.Location)
	off := (int(day.Weekday()) + 6) % 7 // days since Monday
	p := &[3]string{day.Format(time.DateOnly), day.AddDate(0, 0, -off).Format(time.DateOnly), day.Format("2006-01")}
	a.periods[s] = p
	return p
}

func match(vals []string, v string) bool { return len(vals) == 0 || slices.Contains(vals, v) }

func prefixMatch(prefixes []string, cwd string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, p := range prefixes {
		p = strings.TrimSuffix(p, "/")
		if cwd == p || strings.HasPrefix(cwd, p+"/") || p == "" {
			return true
		}
	}
	return false
}

// Report returns the groups, priced, in report order: by time for a
// report whose first dimension is a period, else by cost (then tokens)
// descending; ties by key.
func (a *Aggregator) Report() Report {
	rep := Report{GroupBy: a.q.GroupBy, TimeZone: a.q.Location.String(), Rows: []ReportRow{}}
	if a.prices != nil {
		rep.PriceSource, rep.PriceDate = a.prices.Source, a.prices.Date
	}
	a.flush()
	rep.Totals, _, _ = PriceModels(a.total, a.prices)
	groups := a.kept.gs
	rep.Truncated = a.dropped
	slices.SortFunc(groups, a.kept.order)
	rep.Rows = make([]ReportRow, len(groups))
	for i, g := range groups {
		g.row.Totals, g.row.ModelsUsed, g.row.ModelBreakdowns = PriceModels(g.modelMap(), a.memo)
		rep.Rows[i] = g.row
	}
	return rep
}

// flush moves the open groups to the kept ones (keep).
func (a *Aggregator) flush() {
	for _, g := range a.groups {
		a.keep(g)
	}
	clear(a.groups)
}

// keep sums g's tokens into the report's totals and keeps g among the
// report's rows: with a limit only the first Limit groups in report order
// are kept, in a heap whose root comes last (a report of every session
// sorts Limit groups, not all). It returns the group it dropped (g, or
// the one g replaced), nil when it dropped none.
func (a *Aggregator) keep(g *group) *group {
	for _, mt := range g.models {
		tt := a.total[mt.model]
		if tt == nil {
			tt = &Tokens{}
			a.total[mt.model] = tt
		}
		tt.Add(mt.Tokens)
	}
	g.row.Totals = sumModels(g.models, a.memo) // the order's keys; the breakdown in Report
	h := a.kept
	switch {
	case a.q.Limit <= 0:
		h.gs = append(h.gs, g)
	case len(h.gs) < a.q.Limit:
		heap.Push(h, g)
	default:
		a.dropped = true
		if h.order(g, h.gs[0]) >= 0 {
			return g
		}
		old := h.gs[0]
		h.gs[0] = g
		heap.Fix(h, 0)
		return old
	}
	return nil
}

// groupHeap is a heap of groups whose root comes last in order.
type groupHeap struct {
	gs    []*group
	order func(x, y *group) int
}

func (h *groupHeap) Len() int           { return len(h.gs) }
func (h *groupHeap) Less(i, j int) bool { return h.order(h.gs[i], h.gs[j]) > 0 }
func (h *groupHeap) Swap(i, j int)      { h.gs[i], h.gs[j] = h.gs[j], h.gs[i] }
func (h *groupHeap) Push(x any)         { h.gs = append(h.gs, x.(*group)) }
func (h *groupHeap) Pop() any {
	g := h.gs[len(h.gs)-1]
	h.gs = h.gs[:len(h.gs)-1]
	return g
}

// sumModels is the totals of models without a breakdown.
func sumModels(models []modelTokens, prices *Prices) Totals {
	var tot Totals
	var cost float64
	priced := false
	for _, mt := range models {
		tot.Tokens.Add(mt.Tokens)
		if pr, ok := prices.Lookup(mt.model); ok {
			cost += pr.Cost(mt.Tokens)
			priced = true
		}
	}
	tot.TotalTokens, tot.Calls = tot.Total(), tot.Tokens.Calls
	if priced {
		tot.TotalCost = &cost
	}
	return tot
}

// PriceModels sums models' tokens into totals and a breakdown priced by
// prices.
func PriceModels(models map[string]*Tokens, prices *Prices) (Totals, []string, []ModelBreakdown) {
	var tot Totals
	used := make([]string, 0, len(models))
	bd := make([]ModelBreakdown, 0, len(models))
	var cost float64
	priced := false
	for m, t := range models {
		used = append(used, m)
		b := ModelBreakdown{ModelName: m, Tokens: *t}
		if pr, ok := prices.Lookup(m); ok {
			c := pr.Cost(*t)
			b.Cost = &c
			cost += c
			priced = true
		} else {
			tot.UnpricedModels = append(tot.UnpricedModels, m)
		}
		tot.Tokens.Add(*t)
		bd = append(bd, b)
	}
	slices.Sort(used)
	slices.Sort(tot.UnpricedModels)
	slices.SortFunc(bd, func(x, y ModelBreakdown) int {
		return cmp.Or(-cmp.Compare(deref(x.Cost), deref(y.Cost)), -cmp.Compare(x.Total(), y.Total()), cmp.Compare(x.ModelName, y.ModelName))
	})
	tot.TotalTokens = tot.Total()
	tot.Calls = tot.Tokens.Calls
	if priced {
		tot.TotalCost = &cost
	}
	return tot, used, bd
}

func deref(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

// SortRows puts rows in report order for groupBy.
func SortRows(rows []ReportRow, groupBy []Dimension) {
	byTime := len(groupBy) > 0 && groupBy[0].isTime()
	slices.SortStableFunc(rows, func(x, y ReportRow) int { return compareRows(&x, &y, byTime) })
}

func compareRows(x, y *ReportRow, byTime bool) int {
	return cmp.Or(compareTotals(x, y, byTime), cmp.Compare(rowKey(*x), rowKey(*y)))
}

// compareTotals orders rows by period (for a time report), then cost and
// tokens descending.
func compareTotals(x, y *ReportRow, byTime bool) int {
	if byTime {
		if c := cmp.Compare(x.Period, y.Period); c != 0 {
			return c
		}
	}
	return cmp.Or(-cmp.Compare(deref(x.TotalCost), deref(y.TotalCost)), -cmp.Compare(x.TotalTokens, y.TotalTokens))
}

func rowKey(r ReportRow) string {
	parts := make([]string, len(Dimensions))
	for i, d := range Dimensions {
		parts[i] = r.Label(d)
	}
	return strings.Join(parts, "\x00")
}

// Label is the row's value of dimension d ("" when it is not grouped by it).
func (r ReportRow) Label(d Dimension) string {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	switch d {
	case Day:
		return r.Day
	case Week:
		return r.Week
	case Month:
		return r.Month
	case Session:
		return s(r.SessionID)
	case Project:
		return s(r.Project)
	case Branch:
		return s(r.Branch)
	case Model:
		return s(r.Model)
	case Harness:
		return s(r.Harness)
	case Tenant:
		return s(r.Tenant)
	case Machine:
		return s(r.Machine)
	}
	return ""
}

// Merge sums reports of one query over disjoint parts of the corpus (the
// shards of a partitioned projection) into the report of the whole,
// re-priced by prices.
func Merge(q Query, prices *Prices, parts []Report) Report {
	// The parts priced their rows with the same prices: their costs are
	// added, not recomputed from the tokens a reply carries (it does not
	// carry the one-hour cache writes, priced apart, nor the calls per
	// model).
	type acc struct {
		row    ReportRow
		models map[string]*ModelBreakdown
		calls  int64
	}
	groups := map[string]*acc{}
	truncated := false
	for _, p := range parts {
		truncated = truncated || p.Truncated
		for _, r := range p.Rows {
			k := rowKey(r)
			g := groups[k]
			if g == nil {
				g = &acc{row: r, models: map[string]*ModelBreakdown{}}
				groups[k] = g
			}
			g.calls += r.Calls
			for _, b := range r.ModelBreakdowns {
				m := g.models[b.ModelName]
				if m == nil {
					m = &ModelBreakdown{ModelName: b.ModelName}
					g.models[b.ModelName] = m
				}
				m.Tokens.Add(b.Tokens)
				if b.Cost != nil {
					c := *b.Cost
					if m.Cost != nil {
						c += *m.Cost
					}
					m.Cost = &c
				}
			}
		}
	}
	loc := q.Location
	if loc == nil {
		loc = time.Local
	}
	rep := Report{GroupBy: q.GroupBy, TimeZone: loc.String(), Rows: []ReportRow{}}
	if prices != nil {
		rep.PriceSource, rep.PriceDate = prices.Source, prices.Date
	}
	for _, g := range groups {
		g.row.Totals, g.row.ModelsUsed, g.row.ModelBreakdowns = mergedModels(g.models)
		g.row.Calls = g.calls
		rep.Rows = append(rep.Rows, g.row)
	}
	// The parts' totals, not their rows': a part's rows may be the first
	// of more.
	rep.Totals = sumTotals(parts)
	SortRows(rep.Rows, q.GroupBy)
	if q.Limit > 0 && len(rep.Rows) > q.Limit {
		rep.Rows, truncated = rep.Rows[:q.Limit], true
	}
	rep.Truncated = truncated
	return rep
}

// mergedModels is PriceModels of breakdowns already priced.
func mergedModels(models map[string]*ModelBreakdown) (Totals, []string, []ModelBreakdown) {
	var tot Totals
	used := make([]string, 0, len(models))
	bd := make([]ModelBreakdown, 0, len(models))
	var cost float64
	priced := false
	for m, b := range models {
		used = append(used, m)
		if b.Cost != nil {
			cost += *b.Cost
			priced = true
		} else {
			tot.UnpricedModels = append(tot.UnpricedModels, m)
		}
		tot.Tokens.Add(b.Tokens)
		bd = append(bd, *b)
	}
	slices.Sort(used)
	slices.Sort(tot.UnpricedModels)
	slices.SortFunc(bd, func(x, y ModelBreakdown) int {
		return cmp.Or(-cmp.Compare(deref(x.Cost), deref(y.Cost)), -cmp.Compare(x.Total(), y.Total()), cmp.Compare(x.ModelName, y.ModelName))
	})
	tot.TotalTokens = tot.Total()
	if priced {
		tot.TotalCost = &cost
	}
	return tot, used, bd
}

// sumTotals adds the totals of reports priced alike.
func sumTotals(parts []Report) Totals {
	var tot Totals
	var cost float64
	priced := false
	for _, p := range parts {
		tot.Tokens.Add(p.Totals.Tokens)
		tot.Calls += p.Totals.Calls
		if p.Totals.TotalCost != nil {
			cost += *p.Totals.TotalCost
			priced = true
		}
		for _, m := range p.Totals.UnpricedModels {
			if !slices.Contains(tot.UnpricedModels, m) {
				tot.UnpricedModels = append(tot.UnpricedModels, m)
			}
		}
	}
	slices.Sort(tot.UnpricedModels)
	tot.TotalTokens = tot.Total()
	if priced {
		tot.TotalCost = &cost
	}
	return tot
}

// ParseDimension reads a dimension's name ("cwd" and "workspace" are
// project).
func ParseDimension(s string) (Dimension, error) {
	switch s {
	case "cwd", "workspace":
		return Project, nil
	case "daily":
		return Day, nil
	case "weekly":
		return Week, nil
	case "monthly":
		return Month, nil
	}
	for _, d := range Dimensions {
		if string(d) == s {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown dimension %q (one of day, week, month, session, project, branch, model, harness, tenant, machine)", s)
}

// Source is what a report reads: the stored rows and the dimensions of the
// sessions that spent (the projection's snapshot).
type Source interface {
	// UsageRows calls fn for each row whose slot is in [from, to], in
	// slot order, until fn returns false.
	UsageRows(from, to uint32, fn func(Row) bool) error
	// UsageSession returns a session's dimensions; ok is false for a
	// session the source does not hold.
	UsageSession(id string) (SessionDims, bool)
	// UsageSessions calls fn with every session's dimensions until fn
	// returns false: cheaper than UsageSession for many.
	UsageSessions(fn func(id string, d SessionDims) bool) error
	// UsageTotals calls fn for each session's all-time row of a model
	// and branch (Slot 0), in session order, until fn returns false; with
	// roots, the rows of each root session with its descendants'.
	UsageTotals(roots bool, fn func(Row) bool) error
	// UsageCube calls fn for each row of cube kind whose slot is in
	// [from, to], in slot order, until fn returns false.
	UsageCube(kind CubeKind, from, to uint32, fn func(CubeRow) bool) error
}

// lookups is how many sessions Build looks up one by one before it reads
// them all in one scan.
const lookups = 512

// DimsCache keeps the dimensions of sessions between reports: they are
// fixed when a session's header is applied (its header is immutable), so a
// report need not read them again. It is safe for concurrent use: readers
// see an immutable map, a report that read more adds them in a new one.
type DimsCache struct {
	max int
	mu  sync.Mutex // serializes the writers of m
	m   atomic.Pointer[map[string]SessionDims]
}

// NewDimsCache returns a cache of at most max sessions' dimensions.
func NewDimsCache(max int) *DimsCache { return &DimsCache{max: max} }

func (c *DimsCache) load() map[string]SessionDims {
	if c == nil {
		return nil
	}
	if m := c.m.Load(); m != nil {
		return *m
	}
	return nil
}

func (c *DimsCache) add(more map[string]SessionDims) {
	if c == nil || len(more) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	if len(old)+len(more) > c.max {
		return
	}
	m := make(map[string]SessionDims, len(old)+len(more))
	for k, v := range old {
		m[k] = v
	}
	for k, v := range more {
		m[k] = v
	}
	c.m.Store(&m)
}

// Build sums src's rows for q, priced by prices; cache (nil for none)
// keeps the sessions' dimensions between reports. It reads the fewest
// rows that answer q (planOf): a cube's when q needs no session, else
// the sessions' totals when it needs no time, else the sessions' rows of
// its range.
func Build(q Query, prices *Prices, src Source, cache *DimsCache) (Report, error) {
	pl, kind := planOf(&q)
	return build(q, prices, src, cache, pl, kind)
}

// BuildScan is Build reading the sessions' rows of the range whatever q
// needs: the reference the aggregates' answers are checked and timed
// against.
func BuildScan(q Query, prices *Prices, src Source, cache *DimsCache) (Report, error) {
	return build(q, prices, src, cache, planRows, 0)
}

func build(q Query, prices *Prices, src Source, cache *DimsCache, pl plan, kind CubeKind) (Report, error) {
	agg := NewAggregator(q, prices)
	if pl == planCube || pl == planAll {
		from, to, read := agg.from, agg.to, kind
		if pl == planAll {
			from, to, read = 0, 0, kind.AllTime()
		}
		var d SessionDims
		value := "\xff" // no dimension's value is this
		err := src.UsageCube(read, from, to, func(r CubeRow) bool {
			if r.Value != value {
				value, d = r.Value, kind.dims(r.Value)
			}
			if pl == planAll {
				r.Slot = agg.from // the range is open: any slot in it
			}
			agg.Add(Row{Slot: r.Slot, Model: r.Model, Branch: r.Branch, Tokens: r.Tokens}, d)
			return true
		})
		if err != nil {
			return Report{}, err
		}
		return agg.Report(), nil
	}
	if pl == planSessions {
		if err := agg.addSessions(src); err != nil {
			return Report{}, err
		}
		return agg.Report(), nil
	}
	rows := func(fn func(Row) bool) error { return src.UsageRows(agg.from, agg.to, fn) }
	if pl == planTotals {
		rows = func(fn func(Row) bool) error {
			return src.UsageTotals(false, func(r Row) bool {
				r.Slot = agg.from
				return fn(r)
			})
		}
	}
	known := cache.load()
	dims := map[string]SessionDims{} // read by this report, not in known
	looked, scanned := 0, false
	var scanErr error
	err := rows(func(r Row) bool {
		d, ok := known[r.Session]
		if !ok {
			d, ok = dims[r.Session]
		}
		if !ok && !scanned && looked == lookups {
			scanned = true
			scanErr = src.UsageSessions(func(id string, d SessionDims) bool {
				if _, ok := known[id]; !ok {
					dims[id] = d
				}
				return true
			})
			if scanErr != nil {
				return false
			}
			d, ok = dims[r.Session]
		}
		if !ok {
			looked++
			if d, ok = src.UsageSession(r.Session); ok {
				dims[r.Session] = d
			}
		}
		agg.Add(r, d)
		return true
	})
	if err = cmp.Or(scanErr, err); err != nil {
		return Report{}, err
	}
	cache.add(dims)
	return agg.Report(), nil
}
