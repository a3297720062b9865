//go:build linux

package seccomp

import (
	"reflect"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
)

// TestFromPlan sets each flag of plan.Seccomp alone and checks that the
// Config field of the same name, and only it, is set: a flag added to the
// plan but not converted fails here.
func TestFromPlan(t *testing.T) {
	pt := reflect.TypeOf(plan.Seccomp{})
	for i := range pt.NumField() {
		var s plan.Seccomp
		reflect.ValueOf(&s).Elem().Field(i).SetBool(true)
		c := FromPlan(AMD64, s)
		cv := reflect.ValueOf(c)
		name := pt.Field(i).Name
		f := cv.FieldByName(name)
		if !f.IsValid() || !f.Bool() {
			t.Errorf("plan.Seccomp.%s is not carried into Config", name)
		}
		want := Config{Arch: AMD64}
		reflect.ValueOf(&want).Elem().FieldByName(name).SetBool(true)
		if c != want {
			t.Errorf("plan.Seccomp.%s alone gives %+v", name, c)
		}
	}
}
