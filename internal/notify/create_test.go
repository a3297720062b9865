//go:build linux

package notify

import "testing"

// envCreate makes the harness's filter send the name-creating calls too.
const envCreate = "NOTIFY_TEST_CREATE"

// TestGitName walks gitNames with names each rule must refuse and names
// none may.
func TestGitName(t *testing.T) {
	for _, c := range []struct {
		path   string
		refuse bool
	}{
		{".git", true},
		{"sub/.git", true},
		{"/w/sub/.git/", true},
		{"sub/.git//", true},
		{"sub/.GIT", true},
		{"sub/.Git", true},
		{"sub/.git.", true},
		{"sub/.git ", true},
		{"sub/.git. .", true},
		{"sub/GIT~1", true},
		{"sub/git~1", true},
		{"sub/.git/hooks", false},
		{".gitignore", false},
		{".gitmodules", false},
		{"sub/xgit", false},
		{"sub/.git-away", false},
		{"sub/git", false},
		{"sub/..git", false},
		{"sub/.git~1", false},
		{".", false},
		{"/", false},
	} {
		if _, got := gitName(c.path); got != c.refuse {
			t.Errorf("gitName(%q) = %v, want %v", c.path, got, c.refuse)
		}
	}
	// Every rule says why.
	for i, g := range gitNames {
		if g.why == "" || g.match == nil {
			t.Errorf("rule %d incomplete", i)
		}
	}
}

func TestStdFD(t *testing.T) {
	for _, c := range []struct {
		in string
		n  int32
		ok bool
	}{
		{"/dev/stdin", 0, true},
		{"/dev/stdout", 1, true},
		{"/dev/stderr", 2, true},
		{"/dev/fd/7", 7, true},
		{"/proc/self/fd/3", 3, true},
		{"/dev/stdoutx", 0, false},
		{"/dev/null", 0, false},
	} {
		if n, ok := stdFD(c.in); ok != c.ok || ok && n != c.n {
			t.Errorf("stdFD(%q) = %d, %v; want %d, %v", c.in, n, ok, c.n, c.ok)
		}
	}
}

func TestOwnProc(t *testing.T) {
	tk := &task{tid: 12}
	ts := &taskStatus{tgid: 10}
	for _, c := range []struct{ in, want string }{
		{"/proc/self/environ", "/proc/10/environ"},
		{"/proc/self", "/proc/10"},
		{"/proc/thread-self/fdinfo/3", "/proc/10/task/12/fdinfo/3"},
		// The task's descriptors are acquire's (procSelfFD).
		{"/proc/thread-self/fd/3", "/proc/thread-self/fd/3"},
		{"/proc/self/fd/3/x", "/proc/self/fd/3/x"},
		{"/proc/selfish", "/proc/selfish"},
		{"/proc/1/status", "/proc/1/status"},
		{"rel/proc/self", "rel/proc/self"},
	} {
		if got := tk.ownProc(ts, c.in); got != c.want {
			t.Errorf("ownProc(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
