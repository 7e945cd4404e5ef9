package follow

import (
	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/record"
)

// onMachine is a converter whose new session headers name the machine the
// file was captured on (the header's machine, docs/protocol.md#2-the-session-log-stream): the
// converters are pure and know no host, so the capture side stamps it.
type onMachine struct {
	capture.Converter
	machine string
}

// withMachine returns c stamping machine into the headers it emits ("":
// c itself).
func withMachine(c capture.Converter, machine string) capture.Converter {
	if machine == "" {
		return c
	}
	return onMachine{c, machine}
}

func (c onMachine) Feed(l capture.Line) ([]capture.Update, error) {
	ups, err := c.Converter.Feed(l)
	return c.stamp(ups), err
}

func (c onMachine) Finish() []capture.Update { return c.stamp(c.Converter.Finish()) }

func (c onMachine) stamp(ups []capture.Update) []capture.Update {
	for i, u := range ups {
		if u.Header == nil || u.Header.Header.Machine != "" {
			continue
		}
		h := *u.Header
		h.Header.Machine = c.machine
		raw, err := record.EncodeHeader(h)
		if err != nil {
			continue // an invalid name was refused by ValidMachine before
		}
		h.Raw = raw
		ups[i].Header = &h
	}
	return ups
}

// NewConverterOn is NewConverter for a file captured on machine: the
// headers it emits name it ("" names none), as ImportOn's and a watcher's.
func NewConverterOn(f capture.Format, path string, own *dshq.HeaderRecord, machine string) capture.Converter {
	return withMachine(NewConverter(f, path, own), machine)
}
