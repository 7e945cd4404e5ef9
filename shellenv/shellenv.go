// Package shellenv is the managed DSH_* environment of a harness's shell
// children (docs/sdk.md#the-shell-environment): the contributor registry with
// its built-in facts (DSH_HOME, DSH_SHELL, DSH_SESSION_ID), the sanitizing
// merge that builds a child process's environment, and DSH_HOME resolution.
//
// The variables are correlation facts for scripts, not credentials. Ordering
// of names follows the byte order of their UTF-8 (upstream used JavaScript
// localeCompare; for the ASCII names of contributors and keys the only
// difference is case order).
package shellenv

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// The built-in keys, owned by the registry and reserved.
const (
	KeyHome      = "DSH_HOME"
	KeyShell     = "DSH_SHELL"
	KeySessionID = "DSH_SESSION_ID"
)

// ErrRegistration is wrapped by every refusal of Register.
var ErrRegistration = errors.New("shell env registration refused")

// ErrCollect is wrapped by every failure of Collect.
var ErrCollect = errors.New("shell env collect failed")

var keyRest = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// Variable declares one key of a contributor.
type Variable struct {
	// Description says what the value is; it must not be blank.
	Description string
}

// Execution is one shell command about to run.
type Execution struct {
	// SessionID is the agent session running the command, "" when the
	// execution has no agent.
	SessionID string
	// Cwd is the command's working directory, for contributors.
	Cwd string
}

// Contributor declares DSH_* keys and resolves their values per execution.
type Contributor struct {
	// Name identifies the contributor; it must not be blank or taken.
	Name string
	// Variables are the keys the contributor owns, with descriptions.
	Variables map[string]Variable
	// Resolve returns the values available for exec: a subset of the
	// declared keys, each a string. Missing keys mean "not available now".
	// Values of any other type are refused, as upstream refuses them.
	Resolve func(exec Execution) (map[string]any, error)
}

// Declaration is one declared key, as List reports it.
type Declaration struct {
	Contributor string
	Key         string
	Description string
}

// Registry is the shell environment registry. It is safe for concurrent use.
type Registry struct {
	home string

	mu           sync.Mutex // guards contributors and owners
	contributors map[string]*Contributor
	owners       map[string]string // key → contributor name
}

// NewRegistry returns a registry whose DSH_HOME is home, which must be an
// absolute, clean path (see ResolveHome).
func NewRegistry(home string) (*Registry, error) {
	if home == "" || !isAbs(home) || cleanPath(home) != home {
		return nil, fmt.Errorf("shell env: DSH_HOME %q must be an absolute, clean path", home)
	}
	return &Registry{home: home, contributors: map[string]*Contributor{}, owners: map[string]string{}}, nil
}

// Register adds a contributor and returns its disposer, which removes it
// (idempotent). Refusals, checked in this order, wrap ErrRegistration: a
// blank name, a name already registered, then per declared key in key
// order: an invalid key (not DSH_ followed by [A-Z][A-Z0-9_]*), a reserved
// key, a blank description, a key owned by another contributor.
func (r *Registry) Register(c Contributor) (dispose func(), err error) {
	if strings.TrimSpace(c.Name) == "" {
		return nil, regErr("shell env contributor name must be non-empty")
	}
	if c.Resolve == nil {
		return nil, regErr("shell env contributor %q has no resolver", c.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.contributors[c.Name]; ok {
		return nil, regErr("shell env contributor %q is already registered", c.Name)
	}
	keys := sortedKeys(c.Variables)
	for _, k := range keys {
		switch {
		case !strings.HasPrefix(k, "DSH_") || !keyRest.MatchString(k[len("DSH_"):]):
			return nil, regErr("shell env contributor %q declared invalid key %q; keys are DSH_ followed by [A-Z][A-Z0-9_]*", c.Name, k)
		case k == KeyHome || k == KeyShell || k == KeySessionID:
			return nil, regErr("shell env contributor %q cannot own reserved key %q", c.Name, k)
		case strings.TrimSpace(c.Variables[k].Description) == "":
			return nil, regErr("shell env contributor %q must describe key %q", c.Name, k)
		}
		if owner, ok := r.owners[k]; ok {
			return nil, regErr("shell env key %q is already owned by contributor %q; contributor %q cannot also own it", k, owner, c.Name)
		}
	}
	own := c
	own.Variables = make(map[string]Variable, len(c.Variables))
	for _, k := range keys {
		own.Variables[k] = c.Variables[k]
		r.owners[k] = c.Name
	}
	r.contributors[c.Name] = &own
	var once sync.Once
	return func() { once.Do(func() { r.remove(&own) }) }, nil
}

func (r *Registry) remove(c *Contributor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.contributors[c.Name] != c {
		return
	}
	delete(r.contributors, c.Name)
	for k := range c.Variables {
		delete(r.owners, k)
	}
}

func regErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRegistration, fmt.Sprintf(format, args...))
}

// Collect resolves the environment of one execution: the built-ins
// (DSH_HOME, DSH_SHELL=1, DSH_SESSION_ID when exec has an agent) merged with
// every contributor's values, contributors called in name order. A resolver
// that fails, returns an undeclared key, or returns a non-string value fails
// the collect (the shell call must fail loudly); the error wraps ErrCollect.
// The result is a new map the caller owns; Sorted lists it by key.
func (r *Registry) Collect(exec Execution) (Env, error) {
	r.mu.Lock()
	cs := make([]*Contributor, 0, len(r.contributors))
	for _, c := range r.contributors {
		cs = append(cs, c)
	}
	r.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })

	env := Env{KeyHome: r.home, KeyShell: "1"}
	if exec.SessionID != "" {
		env[KeySessionID] = exec.SessionID
	}
	for _, c := range cs {
		vals, err := c.Resolve(exec)
		if err != nil {
			return nil, fmt.Errorf("%w: contributor %q: %w", ErrCollect, c.Name, err)
		}
		for _, k := range sortedKeys(vals) {
			if _, ok := c.Variables[k]; !ok {
				return nil, fmt.Errorf("%w: shell env contributor %q returned undeclared key %q", ErrCollect, c.Name, k)
			}
			s, ok := vals[k].(string)
			if !ok {
				return nil, fmt.Errorf("%w: shell env contributor %q returned a non-string value for %q (%T)", ErrCollect, c.Name, k, vals[k])
			}
			env[k] = s
		}
	}
	return env, nil
}

// List returns every contributor declaration sorted by key, without running
// resolvers. It does not include the built-ins (as upstream).
func (r *Registry) List() []Declaration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Declaration
	for name, c := range r.contributors {
		for k, v := range c.Variables {
			out = append(out, Declaration{Contributor: name, Key: k, Description: v.Description})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Env is a collected environment: key → value.
type Env map[string]string

// Sorted returns the environment as KEY=VALUE entries sorted by key.
func (e Env) Sorted() []string {
	out := make([]string, 0, len(e))
	for _, k := range sortedKeys(e) {
		out = append(out, k+"="+e[k])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
