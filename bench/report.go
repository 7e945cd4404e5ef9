package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one figure of the table beside its reference, measured in the same
// run.
type Row struct {
	// Metric names what dshq did, with its unit.
	Metric string `json:"metric"`
	// Value is dshq's figure.
	Value float64 `json:"value"`
	// Reference names what the figure is measured against.
	Reference string `json:"reference"`
	// RefValue is the reference's figure, in the same unit.
	RefValue float64 `json:"refValue"`
	// Ratio is Value / RefValue (NaN when the reference is 0).
	Ratio float64 `json:"ratio"`
	// Target is issue 28's bound on this row at the report's TargetSize,
	// with whether the run met it (nil: the row has none).
	Target *Target `json:"target,omitempty"`

	section int
}

// Target is a bound on one row's figure, and whether the row is within it.
type Target struct {
	// Of is what is bounded: "value" (dshq's figure) or "ratio" (dshq /
	// reference).
	Of string `json:"of"`
	// AtMost is true for an upper bound (≤), false for a lower one (≥).
	AtMost bool `json:"atMost"`
	// Bound is the threshold, in the unit of Of.
	Bound float64 `json:"bound"`
	// Met says whether the figure is within the bound.
	Met bool `json:"met"`
}

// bound is a target at each of issue 28's corpus sizes (0: none at that
// size).
type bound struct {
	of           string
	atMost       bool
	at100k, at1M float64
}

// The sizes the targets are set for, and the corpus size (events) from
// which a run counts as the larger: the geometric middle of 100k and 1M.
const (
	size100k         = "100k"
	size1M           = "1M"
	size1MFromEvents = 316_228
)

// valueAtMost bounds a row's value from above, ratioAtMost and
// ratioAtLeast its ratio to the reference.
func valueAtMost(at100k, at1M float64) bound  { return bound{"value", true, at100k, at1M} }
func ratioAtMost(at100k, at1M float64) bound  { return bound{"ratio", true, at100k, at1M} }
func ratioAtLeast(at100k, at1M float64) bound { return bound{"ratio", false, at100k, at1M} }

// Report is the result of one bench run.
type Report struct {
	// Sessions, Events and Records describe the generated corpus
	// (Records = events + headers, plus the probes the bench appends).
	Sessions int `json:"sessions"`
	Events   int `json:"events"`
	Records  int `json:"records"`
	// Documents is the number of search documents (events with text).
	Documents int `json:"documents"`
	// Phases says how the corpus reached the stream.
	Phases Phases `json:"phases"`
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration `json:"elapsedNs"`
	// Rows are the figures, in table order.
	Rows []Row `json:"rows"`
	// ServeOnly is true for a run of the dshq serve phase alone.
	ServeOnly bool `json:"serveOnly,omitempty"`
	// TargetSize is the corpus size of issue 28 whose targets the rows
	// carry: "1M" from 316,228 events up, "100k" below.
	TargetSize string `json:"targetSize"`
	// Tails say, for each search class, what overlapped the slowest 1% of
	// dshq's samples (see TailNote).
	Tails []TailNote `json:"tails,omitempty"`
	// SettledAfter is how long the queries waited for the Bleve indexes'
	// background work to finish (Config.NoSettle).
	SettledAfter time.Duration `json:"settledAfterNs,omitempty"`

	section int // the section rows are added to (see Section…)
}

// The table's sections, in print order; phases add rows out of this order.
const (
	sectionThroughput = iota
	sectionPublishLatency
	sectionAppend
	sectionSearch
	sectionRead
	sectionRebuild
	sectionMemory
	sectionServe
	sectionServeMemory
	sectionDisk
)

func (r *Report) add(metric string, value float64, ref string, refValue float64) {
	ratio := math.NaN()
	if refValue != 0 {
		ratio = value / refValue
	}
	r.Rows = append(r.Rows, Row{Metric: metric, Value: value, Reference: ref, RefValue: refValue, Ratio: ratio, section: r.section})
}

// addLatency adds the p50 and p99 rows of one operation beside a reference.
func (r *Report) addLatency(metric string, got []time.Duration, ref string, want []time.Duration) {
	r.add(metric+" p50 (ms)", ms(percentile(got, 0.50)), ref+" p50", ms(percentile(want, 0.50)))
	r.add(metric+" p99 (ms)", ms(percentile(got, 0.99)), ref+" p99", ms(percentile(want, 0.99)))
}

// size is the corpus size whose targets apply to this run.
func (r *Report) size() string {
	if r.Events >= size1MFromEvents {
		return size1M
	}
	return size100k
}

// target sets b, at the run's size, on the row added last; a bound with
// no threshold at this size sets nothing.
func (r *Report) target(b bound) {
	r.TargetSize = r.size()
	limit := b.at100k
	if r.TargetSize == size1M {
		limit = b.at1M
	}
	if limit == 0 || len(r.Rows) == 0 {
		return
	}
	row := &r.Rows[len(r.Rows)-1]
	got := row.Value
	if b.of == "ratio" {
		got = row.Ratio
	}
	met := got >= limit // false for NaN
	if b.atMost {
		met = got <= limit
	}
	row.Target = &Target{Of: b.of, AtMost: b.atMost, Bound: limit, Met: met}
}
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the p-th latency (nearest rank); 0 for no samples.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// sort orders the rows by section, keeping their order within a section.
func (r *Report) sort() {
	slices.SortStableFunc(r.Rows, func(a, b Row) int { return a.section - b.section })
}

// WriteTable prints the report as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "dshq bench: %d sessions, %d events, %d stream records, %d search documents; %s\n",
		r.Sessions, r.Events, r.Records, r.Documents, r.Elapsed.Round(time.Second))
	ph := r.Phases
	if r.ServeOnly {
		fmt.Fprintf(w, "dshq serve phase only: every record published into a dshq serve process, %d in flight, sync always\n\n", DefaultServeInFlight)
		return r.writeRows(w)
	}
	if ph.BulkSessions > 0 {
		fmt.Fprintf(w, "bulk load (no figure, nothing projected meanwhile): %d sessions, %d events through Store.Import, record by record, %d writers, sync relaxed, in %s (%.0f events/s)\n",
			ph.BulkSessions, ph.BulkEvents, ph.BulkWriters, ph.BulkElapsed.Round(time.Millisecond), float64(ph.BulkEvents)/ph.BulkElapsed.Seconds())
	}
	fmt.Fprintf(w, "measured ingest sample: %d sessions, %d events through bus.Store appends, %d writers, sync always, projector running; every later phase runs on sync always\n\n",
		ph.SampleSessions, ph.SampleEvents, ph.SampleWriters)
	return r.writeRows(w)
}

func (r *Report) writeRows(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tdshq\treference\tref\tratio\t")
	fmt.Fprintln(tw, strings.Repeat("-", 6)+"\t"+strings.Repeat("-", 4)+"\t"+strings.Repeat("-", 9)+"\t---\t-----\t")
	for i, row := range r.Rows {
		if i > 0 && row.section != r.Rows[i-1].section {
			fmt.Fprintln(tw, "\t\t\t\t\t")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", row.Metric, num(row.Value), row.Reference, num(row.RefValue), ratio(row.Ratio))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w, "\nratio = dshq / reference (throughput: higher is better; latency, time and memory: lower is better)"); err != nil {
		return err
	}
	if err := r.writeTargets(w); err != nil {
		return err
	}
	return r.writeTails(w)
}

// writeTails prints each search class's tail note.
func (r *Report) writeTails(w io.Writer) error {
	if len(r.Tails) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\ntails: what overlapped the slowest 1% of dshq's samples of each search class, beside all of them (probed outside the timing; docs/profiling-search.md)")
	for _, t := range r.Tails {
		for _, l := range t.Lines() {
			if _, err := fmt.Fprintln(w, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeTargets prints the rows that carry a target, each with its figure,
// its bound and whether the run met it.
func (r *Report) writeTargets(w io.Writer) error {
	met, all := 0, 0
	for _, row := range r.Rows {
		if row.Target != nil {
			all++
			if row.Target.Met {
				met++
			}
		}
	}
	if all == 0 {
		return nil
	}
	fmt.Fprintf(w, "\ntargets (issue 28, its bounds at %s events; this corpus: %d events): %d of %d met\n", r.TargetSize, r.Events, met, all)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tof\tdshq\tbound\t")
	fmt.Fprintln(tw, "------\t--\t----\t-----\t")
	for _, row := range r.Rows {
		t := row.Target
		if t == nil {
			continue
		}
		name, got, limit := row.Metric, num(row.Value), num(t.Bound)
		if t.Of == "ratio" {
			name += " / " + row.Reference
			got, limit = ratio(row.Ratio), ratio(t.Bound)
		}
		op, verdict := "≥", "missed"
		if t.AtMost {
			op = "≤"
		}
		if t.Met {
			verdict = "met"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\n", name, t.Of, got, op, limit, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "\nnot measured in one run: events.search beside the tree before this round (run the bench on both trees)")
	return err
}

// MarshalJSON writes NaN ratios as null.
func (row Row) MarshalJSON() ([]byte, error) {
	type plain Row
	out := struct {
		plain
		Ratio *float64 `json:"ratio"`
	}{plain: plain(row)}
	if !math.IsNaN(row.Ratio) && !math.IsInf(row.Ratio, 0) {
		out.Ratio = &row.Ratio
	}
	return json.Marshal(out)
}

func num(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", v)
}
