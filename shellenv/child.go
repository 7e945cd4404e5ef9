package shellenv

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
)

// sensitive matches the names of inherited variables that are never passed
// to a shell child.
var sensitive = regexp.MustCompile(`(?i)KEY|PASSWORD|SECRET|TOKEN`)

// TerminalOverrides are set for every shell child so that programs do not
// page, colour or query a terminal.
var TerminalOverrides = map[string]string{"NO_COLOR": "1", "TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat"}

// ChildEnv builds a shell child's environment
// (docs/sdk.md#building-a-childs-environment), in this order:
//  1. the parent environment (KEY=VALUE entries, as os.Environ) without any
//     key matching /KEY|PASSWORD|SECRET|TOKEN/i and without any key whose
//     upper-cased name starts with DSH_ (stale facts of an outer harness);
//  2. TerminalOverrides;
//  3. explicit, the caller's env: a nil value deletes the key;
//  4. dshEnv, the trusted snapshot from Collect, last, so nothing displaces
//     a managed value.
//
// Inherited keys keep their order (the last of duplicates wins); keys added
// by a later step follow in key order. parent is not modified.
func ChildEnv(parent []string, explicit map[string]*string, dshEnv map[string]string) []string {
	var order []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	for _, kv := range parent {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || sensitive.MatchString(k) || strings.HasPrefix(strings.ToUpper(k), "DSH_") {
			continue
		}
		set(k, v)
	}
	for _, k := range sortedKeys(TerminalOverrides) {
		set(k, TerminalOverrides[k])
	}
	deleted := map[string]bool{}
	for _, k := range sortedKeys(explicit) {
		if explicit[k] == nil {
			delete(vals, k)
			deleted[k] = true
			continue
		}
		delete(deleted, k)
		set(k, *explicit[k])
	}
	for _, k := range sortedKeys(dshEnv) {
		delete(deleted, k)
		set(k, dshEnv[k])
	}
	out := make([]string, 0, len(vals))
	for _, k := range order {
		if v, ok := vals[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// ResolveHome resolves DSH_HOME: the configured value when given (an
// explicitly configured empty string counts as given, as upstream), else
// $DSH_HOME when set and not blank, else <osHome>/.dsh; then a leading "~",
// "~/" or "~\" is expanded against osHome; then the path is made absolute
// (against the process's working directory) and clean. env looks up
// environment variables (os.Getenv). It fails when osHome is needed but
// empty.
func ResolveHome(configured *string, env func(string) string, osHome string) (string, error) {
	var p string
	switch {
	case configured != nil:
		p = *configured
	case env != nil && strings.TrimSpace(env(KeyHome)) != "":
		p = env(KeyHome)
	default:
		if osHome == "" {
			return "", errors.New("resolve DSH_HOME: no home directory to default to")
		}
		p = filepath.Join(osHome, ".dsh")
	}
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		if osHome == "" {
			return "", errors.New("resolve DSH_HOME: cannot expand ~ without a home directory")
		}
		p = filepath.Join(osHome, p[1:])
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return abs, nil
}

func isAbs(p string) bool { return filepath.IsAbs(p) }

func cleanPath(p string) string { return filepath.Clean(p) }
