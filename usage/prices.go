package usage

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Price is one model's price in dollars per million tokens. A missing
// cache price falls back: cacheWrite and cacheRead to input, cacheWrite1h
// to cacheWrite.
type Price struct {
	Input        float64  `json:"input"`
	Output       float64  `json:"output"`
	CacheWrite   *float64 `json:"cacheWrite,omitempty"`
	CacheWrite1h *float64 `json:"cacheWrite1h,omitempty"`
	CacheRead    *float64 `json:"cacheRead,omitempty"`
}

// Prices is a pricing table: its provenance and each model's price.
type Prices struct {
	Source   string           `json:"source"`
	Date     string           `json:"date"`
	Currency string           `json:"currency,omitempty"`
	Unit     string           `json:"unit,omitempty"`
	Models   map[string]Price `json:"models"`

	// looked memoizes Lookup by model name (memo's copies only: a table
	// shared between goroutines is never written).
	looked map[string]lookedUp
}

type lookedUp struct {
	p  Price
	ok bool
}

// memo returns a copy of p that remembers its lookups, for one report.
func (p *Prices) memo() *Prices {
	if p == nil {
		return nil
	}
	c := *p
	c.looked = map[string]lookedUp{}
	return &c
}

//go:embed prices.json
var builtinPrices []byte

// Builtin returns the pricing table kept in the repository
// (usage/prices.json; its source and date are in it).
func Builtin() *Prices {
	p, err := ParsePrices(builtinPrices)
	if err != nil {
		panic("usage: the built-in pricing table does not parse: " + err.Error())
	}
	return p
}

// ParsePrices reads a pricing table in the form of usage/prices.json.
// Every price must be a finite number ≥ 0.
func ParsePrices(b []byte) (*Prices, error) {
	var p Prices
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("pricing table: %w", err)
	}
	if len(p.Models) == 0 {
		return nil, fmt.Errorf("pricing table: no models")
	}
	for m, pr := range p.Models {
		for name, v := range map[string]*float64{"input": &pr.Input, "output": &pr.Output, "cacheWrite": pr.CacheWrite, "cacheWrite1h": pr.CacheWrite1h, "cacheRead": pr.CacheRead} {
			if v != nil && (*v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return nil, fmt.Errorf("pricing table: model %q: %s must be a number ≥ 0", m, name)
			}
		}
	}
	return &p, nil
}

// Override returns p with o's models added or replacing p's (a
// --prices file); the provenance names both.
func (p *Prices) Override(o *Prices) *Prices {
	out := &Prices{Source: p.Source, Date: p.Date, Currency: p.Currency, Unit: p.Unit, Models: map[string]Price{}}
	for k, v := range p.Models {
		out.Models[k] = v
	}
	for k, v := range o.Models {
		out.Models[k] = v
	}
	if o.Source != "" || o.Date != "" {
		out.Source = fmt.Sprintf("%s (%s), over %s (%s)", o.Source, o.Date, p.Source, p.Date)
	}
	return out
}

var dateSuffix = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2})$`)

// Lookup returns model's price: the table's entry for the name, else for
// the name without a provider prefix ("anthropic/", "openai/"…) or a
// trailing release date (claude-sonnet-4-5-20250929 → claude-sonnet-4-5).
// ok is false for a model the table does not price: its cost is unknown,
// never 0.
func (p *Prices) Lookup(model string) (Price, bool) {
	if p == nil {
		return Price{}, false
	}
	if l, ok := p.looked[model]; ok {
		return l.p, l.ok
	}
	pr, ok := p.lookup(model)
	if p.looked != nil {
		p.looked[model] = lookedUp{pr, ok}
	}
	return pr, ok
}

func (p *Prices) lookup(model string) (Price, bool) {
	cands := []string{model}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		cands = append(cands, model[i+1:])
	}
	for _, c := range cands {
		if pr, ok := p.Models[c]; ok {
			return pr, true
		}
		if base := dateSuffix.ReplaceAllString(c, ""); base != c {
			if pr, ok := p.Models[base]; ok {
				return pr, true
			}
		}
	}
	return Price{}, false
}

// Cost is what t cost at pr, in dollars.
func (pr Price) Cost(t Tokens) float64 {
	cw := or(pr.CacheWrite, pr.Input)
	cw1h := or(pr.CacheWrite1h, cw)
	cr := or(pr.CacheRead, pr.Input)
	short := t.CacheCreation - t.CacheCreation1h
	return (float64(t.Input)*pr.Input + float64(t.Output)*pr.Output + float64(short)*cw +
		float64(t.CacheCreation1h)*cw1h + float64(t.CacheRead)*cr) / 1e6
}

func or(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}
