package tools

import (
	"context"

	"github.com/dshq/dshq"
)

func (t *Tools) sessionTrace(ctx context.Context, by Caller, a args) (string, error) {
	c, err := t.caller(ctx, by)
	if err != nil {
		return "", err
	}
	target, err := t.target(ctx, c, a)
	if err != nil {
		return "", err
	}
	trace, err := t.svc.TraceSession(ctx, target)
	if err != nil {
		return "", sanitize(ctx, t.log, "trace session", err)
	}
	lineage, err := c.PruneLineage(target, trace)
	if err != nil {
		return "", err
	}
	ids := []string{target}
	for _, r := range lineage.Ancestors {
		ids = append(ids, r.Header.ID)
	}
	ids = append(ids, descendantIDs(lineage.Descendants)...)
	titles, err := t.titles(ctx, c, ids)
	if err != nil {
		return "", err
	}
	return renderSessionTrace(lineage, titles), nil
}

func (t *Tools) sessionEventTrace(ctx context.Context, by Caller, a args) (string, error) {
	c, err := t.caller(ctx, by)
	if err != nil {
		return "", err
	}
	target, err := t.target(ctx, c, a)
	if err != nil {
		return "", err
	}
	seq, _, err := a.seqArg("seq")
	if err != nil {
		return "", err
	}
	tr, err := t.svc.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: target, Seq: seq})
	if err != nil {
		return "", sanitize(ctx, t.log, "trace event", err)
	}
	if err := c.Recheck(target, tr.Session); err != nil {
		return "", err
	}
	titles, err := t.titles(ctx, c, []string{target})
	if err != nil {
		return "", err
	}
	return renderEventTrace(sessionLine(target, titles[target]), tr), nil
}

func (t *Tools) sessionEventRead(ctx context.Context, by Caller, a args) (string, error) {
	c, err := t.caller(ctx, by)
	if err != nil {
		return "", err
	}
	target, err := t.target(ctx, c, a)
	if err != nil {
		return "", err
	}
	seq, _, err := a.seqArg("seq")
	if err != nil {
		return "", err
	}
	before, _, err := a.seqArg("before")
	if err != nil {
		return "", err
	}
	after, _, err := a.seqArg("after")
	if err != nil {
		return "", err
	}
	w, err := t.svc.ReadEvent(ctx, dshq.EventReadRequest{SessionID: target, Seq: seq, Before: before, After: after})
	if err != nil {
		return "", sanitize(ctx, t.log, "read event", err)
	}
	if err := c.Recheck(target, w.Session); err != nil {
		return "", err
	}
	titles, err := t.titles(ctx, c, []string{target})
	if err != nil {
		return "", err
	}
	return renderEventRead(sessionLine(target, titles[target]), w)
}
