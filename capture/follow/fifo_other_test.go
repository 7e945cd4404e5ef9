//go:build !unix

package follow_test

import "errors"

func mkfifo(string) error { return errors.New("FIFOs are a unix thing") }
