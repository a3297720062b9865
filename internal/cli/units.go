package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize parses "1MiB", "2GiB", "512K", "1000" (bytes).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1048576, 512KiB, 1MiB, 2GiB)", s)
	}
	if n > 0 && mult > (1<<62)/n {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// ParseDuration parses "30s", "5m", "1h30m"; a bare number is seconds.
func ParseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q (want e.g. 30s, 5m, 1h)", s)
	}
	return d, nil
}

type sizeFlag struct{ v *int64 }

func (f sizeFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return ""
	}
	return strconv.FormatInt(*f.v, 10)
}
func (f sizeFlag) Set(s string) error {
	n, err := ParseSize(s)
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
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*f.v = d
	return nil
}
func (f durFlag) Type() string { return "duration" }
