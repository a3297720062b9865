//go:build linux

package mcpserver

import (
	"encoding/json"
	"testing"
)

func TestStampRequestID(t *testing.T) {
	for _, c := range []struct {
		name, params string
		ok           bool
		meta         map[string]any
	}{
		{"no params", ``, true, map[string]any{requestIDMeta: "7"}},
		{"no meta", `{"name":"list","arguments":{}}`, true, map[string]any{requestIDMeta: "7"}},
		{"meta kept", `{"name":"list","_meta":{"progressToken":3}}`, true, map[string]any{"progressToken": 3.0, requestIDMeta: "7"}},
		// A client cannot choose the job id of its record.
		{"forged id replaced", `{"name":"list","_meta":{"dev.confine/request_id":"forged"}}`, true, map[string]any{requestIDMeta: "7"}},
		{"meta not an object", `{"name":"list","_meta":[1]}`, true, map[string]any{requestIDMeta: "7"}},
		{"params not an object", `[1,2]`, false, nil},
		{"null params", `null`, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := stampRequestID(json.RawMessage(c.params), "7")
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok=%v", err, c.ok)
			}
			if !c.ok {
				return
			}
			var v struct {
				Meta map[string]any `json:"_meta"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatal(err)
			}
			if len(v.Meta) != len(c.meta) {
				t.Fatalf("meta %v, want %v", v.Meta, c.meta)
			}
			for k, want := range c.meta {
				if v.Meta[k] != want {
					t.Errorf("meta[%s] = %v, want %v", k, v.Meta[k], want)
				}
			}
		})
	}
}
