package usage

// CubeKind names the session dimension a cube's rows keep beside their
// slot, model and branch: the projection keeps, for each kind, what every
// session with one value of it spent per slot, and the same over all time
// (AllTime), so that a report which needs no session reads far fewer rows
// than the sessions' own.
type CubeKind byte

// The cube kinds.
const (
	CubeNone    CubeKind = 'n' // no session dimension: slot, model, branch
	CubeProject CubeKind = 'p' // the session's cwd
	CubeMachine CubeKind = 'm'
	CubeHarness CubeKind = 'h'
	CubeTenant  CubeKind = 't'
)

// CubeKinds lists the kinds of the slot cubes.
var CubeKinds = []CubeKind{CubeNone, CubeProject, CubeMachine, CubeHarness, CubeTenant}

// AllTime is the kind of the cube that sums k's rows over all time (its
// rows have slot 0).
func (k CubeKind) AllTime() CubeKind { return k - 'a' + 'A' }

// Value is d's value of k's dimension.
func (k CubeKind) Value(d SessionDims) []byte {
	switch k {
	case CubeProject:
		return []byte(d.Cwd)
	case CubeMachine:
		return []byte(d.Machine)
	case CubeHarness:
		return []byte(d.Harness)
	case CubeTenant:
		return []byte(d.Tenant)
	}
	return nil
}

// dims is a session's dimensions with only k's set to v.
func (k CubeKind) dims(v string) SessionDims {
	var d SessionDims
	switch k {
	case CubeProject:
		d.Cwd = v
	case CubeMachine:
		d.Machine = v
	case CubeHarness:
		d.Harness = v
	case CubeTenant:
		d.Tenant = v
	}
	return d
}

// CubeRow is one row of a cube: what the sessions with one value of its
// kind's dimension spent within one slot with one model on one branch.
type CubeRow struct {
	Slot   uint32
	Value  string
	Model  string
	Branch string
	Tokens
}

// plan is how Build reads a query's rows.
type plan int

const (
	planRows     plan = iota // every session's rows of the slot range
	planTotals               // every session's all-time totals
	planSessions             // the same (or the roots'), one group per session
	planCube                 // a slot cube of the range
	planAll                  // an all-time cube
)

// planOf picks the fewest rows that answer q: a cube when q needs no
// session and at most one session dimension, a session's totals when it
// needs no time.
func planOf(q *Query) (plan, CubeKind) {
	needSession := len(q.Sessions) > 0
	needTime := !q.Since.IsZero() || !q.Until.IsZero()
	kinds := map[CubeKind]bool{}
	if len(q.Cwds) > 0 || len(q.Prefixes) > 0 {
		kinds[CubeProject] = true
	}
	if len(q.Machines) > 0 {
		kinds[CubeMachine] = true
	}
	if len(q.Harness) > 0 {
		kinds[CubeHarness] = true
	}
	if len(q.Tenants) > 0 {
		kinds[CubeTenant] = true
	}
	for _, d := range q.GroupBy {
		switch d {
		case Day, Week, Month:
			needTime = true
		case Session:
			needSession = true
		case Project:
			kinds[CubeProject] = true
		case Machine:
			kinds[CubeMachine] = true
		case Harness:
			kinds[CubeHarness] = true
		case Tenant:
			kinds[CubeTenant] = true
		}
	}
	switch {
	case needSession || len(kinds) > 1:
		if needTime {
			return planRows, 0
		}
		// A report of sessions alone, filtered by no session dimension,
		// groups each session's (or root's) consecutive totals as they
		// come.
		if len(q.GroupBy) == 1 && q.GroupBy[0] == Session && len(q.Sessions) == 0 && len(kinds) == 0 {
			return planSessions, 0
		}
		return planTotals, 0
	}
	kind := CubeNone
	for k := range kinds {
		kind = k
	}
	if needTime {
		return planCube, kind
	}
	return planAll, kind
}

// addSessions groups src's totals (the roots' with Rollup) by session as
// they come: a session's rows are consecutive, so its group is whole when
// the next begins, and it is kept or dropped then (keep). A dropped
// group is reused: a report of the top sessions allocates about Limit.
func (a *Aggregator) addSessions(src Source) error {
	var cur, free *group
	done := func() {
		if cur != nil && len(cur.models) > 0 {
			cur.row = ReportRow{Period: cur.key, SessionID: &cur.key}
			free = a.keep(cur)
		}
		cur = nil
	}
	err := src.UsageTotals(a.q.Rollup, func(r Row) bool {
		if !match(a.q.Models, r.Model) || !match(a.q.Branches, r.Branch) {
			return true
		}
		if cur == nil || cur.key != r.Session {
			done()
			cur, free = free, nil
			if cur == nil {
				cur = &group{}
			}
			cur.key, cur.models = r.Session, cur.models[:0]
		}
		for i := range cur.models {
			if cur.models[i].model == r.Model {
				cur.models[i].Add(r.Tokens)
				return true
			}
		}
		cur.models = append(cur.models, modelTokens{r.Model, r.Tokens})
		return true
	})
	done()
	return err
}
