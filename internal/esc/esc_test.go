package esc

import "testing"

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"/home/u/a b/c.txt", "/home/u/a b/c.txt"},
		{"héllo", "héllo"},
		{"", ""},
		{"evil\x1b[2K\rconfine: ok\n", `"evil\x1b[2K\rconfine: ok\n"`},
		{"bell\a", `"bell\a"`},
		{"tab\there", `"tab\there"`},
		{"bad\xffutf8", `"bad\xffutf8"`},
		{"rtl\u202eoverride", `"rtl\u202eoverride"`},
		{"nbsp\u00a0x", `"nbsp\u00a0x"`},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := Join([]string{"a", "b\n"}, ", "); got != `a, "b\n"` {
		t.Errorf("Join = %s", got)
	}
}
