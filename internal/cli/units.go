//go:build linux || darwin

package cli

import (
	"github.com/confine-sandbox/confine/spec"
	"strconv"
	"time"
)

// Size and duration flags parse with the same rules as profile files.

type sizeFlag struct{ v *int64 }

func (f sizeFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}
func (f sizeFlag) Set(s string) error {
	n, err := spec.ParseSize(s)
	if err != nil {
		return err
	}
	*f.v = n
	return nil
}
func (f sizeFlag) Type() string { return "size" }

type durFlag struct{ v *time.Duration }

func (f durFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return f.v.String()
}
func (f durFlag) Set(s string) error {
	d, err := spec.ParseDuration(s)
	if err != nil {
		return err
	}
	*f.v = d
	return nil
}
func (f durFlag) Type() string { return "duration" }
