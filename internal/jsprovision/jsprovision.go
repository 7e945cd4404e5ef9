// Package jsprovision is the provisioning both of dshq's streams share
// (the session stream, package bus; the live feed, package feed): create a
// stream or bind the one that exists, and name every way an existing
// stream's configuration differs from what dshq needs.
package jsprovision

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// CreateOrBind creates the stream want, or binds the existing stream of its
// name (existed), whose configuration the caller then compares.
func CreateOrBind(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (st jetstream.Stream, existed bool, err error) {
	st, err = js.CreateStream(ctx, want)
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return st, false, err
	}
	st, err = js.Stream(ctx, want.Name)
	return st, true, err
}

// Diffs are the differences of an existing configuration from the one
// wanted, one "<field> is <got>, want <want>" each.
type Diffs []string

// Add notes that field is got where want is needed.
func (d *Diffs) Add(field string, want, got any) {
	*d = append(*d, fmt.Sprintf("%s is %v, want %v", field, got, want))
}

// String joins the differences with "; ".
func (d Diffs) String() string { return strings.Join(d, "; ") }
