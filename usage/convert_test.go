package usage_test

import (
	"os"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/usage"
)

// sumFiles converts files (each of format f) and sums their usage as the
// projection does: per-tenant keys, a replacing entry subtracting the one
// it replaces. It returns the rows by (day in UTC, model).
func sumFiles(files []string) (map[[2]string]usage.Tokens, error) {
	out := map[[2]string]usage.Tokens{}
	seen := map[string][2]any{} // key → (day/model, tokens)
	states := map[string]*usage.State{}
	harness := map[string]string{}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		fmt := capture.Detect(path, data)
		if !follow.Harness(fmt) {
			continue
		}
		conv := follow.NewConverter(fmt, path, nil)
		var ups []capture.Update
		for _, l := range capture.SplitLines(data) {
			u, err := conv.Feed(l)
			if err != nil {
				return nil, err
			}
			ups = append(ups, u...)
		}
		ups = append(ups, conv.Finish()...)
		for _, u := range ups {
			if u.Header != nil {
				harness[u.SessionID] = u.Header.Header.Harness
			}
			st := states[u.SessionID]
			if st == nil {
				st = &usage.State{}
				states[u.SessionID] = st
			}
			for _, ev := range u.Events {
				for _, e := range st.Event(harness[u.SessionID], ev.Raw, ev.Time) {
					k := [2]string{usage.SlotTime(usage.SlotOf(e.Time)).Format("2006-01-02"), e.Model}
					if e.Key != "" {
						if old, ok := seen[e.Key]; ok {
							if !e.Replace {
								continue
							}
							ok := old[0].([2]string)
							t := out[ok]
							t.Sub(old[1].(usage.Tokens))
							out[ok] = t
						}
						seen[e.Key] = [2]any{k, e.Tokens}
					}
					t := out[k]
					t.Add(e.Tokens)
					out[k] = t
				}
			}
		}
	}
	return out, nil
}
