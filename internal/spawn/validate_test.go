//go:build linux

package spawn

import (
	"strings"
	"syscall"
	"testing"
)

// Every index an op carries is checked when the program is prepared.
func TestValidate(t *testing.T) {
	ok := Call(1, syscall.SYS_GETPID)
	for _, tt := range []struct {
		name string
		ops  []Op
		want string // "" = valid
	}{
		{"plain", []Op{ok}, ""},
		{"slots in range", []Op{ok.ToSlot(0), ok.FromSlot(0, 5).WantSlot(numSlots - 1)}, ""},
		{"to slot too high", []Op{ok.ToSlot(numSlots)}, "to slot"},
		{"from slot too high", []Op{ok.FromSlot(numSlots, 0)}, "from slot"},
		{"negative from slot", []Op{ok.FromSlot(-2, 0)}, "from slot"},
		{"want slot too high", []Op{ok.WantSlot(99)}, "want slot"},
		{"argument 6", []Op{ok.FromSlot(1, 6)}, "argument index 6"},
		{"negative argument", []Op{ok.FromSlot(1, -1)}, "argument index -1"},
		{"skip within list", []Op{ok.SkipOn(syscall.ENOENT, 1), ok}, ""},
		{"skip past the end", []Op{ok.SkipOn(syscall.ENOENT, 2), ok}, "skips 2"},
		{"skip without errno", []Op{ok.SkipOn(0, 1), ok}, "skips 1"},
	} {
		for _, list := range []string{"init", "command", "janitor"} {
			var p Program
			switch list {
			case "init":
				p.Init = tt.ops
			case "command":
				p.Cmd = tt.ops
			default:
				p.Janitor = tt.ops
			}
			err := p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s/%s: %v", tt.name, list, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), list)):
				t.Errorf("%s/%s: %v, want an error about %q", tt.name, list, err, tt.want)
			}
		}
	}
}
