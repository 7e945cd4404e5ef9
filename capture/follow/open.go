package follow

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// NotRegularError is a path named like a session file that is not a
// regular file (a FIFO, a device, a socket, a directory): it is never read,
// so it never blocks the watcher (docs/harnesses.md#dshq-watch).
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string { return e.Path + ": " + e.Why() }

// Why is the message without the path.
func (e *NotRegularError) Why() string {
	return fmt.Sprintf("not a regular file (%s): never read", e.Mode.Type())
}

// openRegular opens path for reading, refusing at once, without blocking,
// anything but a regular file (*NotRegularError).
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	fh, err := openNoBlock(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := fh.Stat()
	if err != nil {
		_ = fh.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		_ = fh.Close()
		return nil, nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return fh, fi, nil
}

// readRegular reads the whole of the regular file at path
// (*NotRegularError for any other).
func readRegular(path string) ([]byte, error) {
	fh, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data := make([]byte, 0, fi.Size()+512)
	for {
		n, err := fh.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return nil, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}
