//go:build linux

package hostop

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FilePatch is one file's part of a unified diff.
type FilePatch struct {
	Old, New string // paths as the headers give them; "" for /dev/null
	Hunks    []hunk
}

type hunk struct {
	oldStart, oldLen int
	newStart, newLen int
	lines            []string // each with its ' ', '-' or '+' prefix
	noEOLOld         bool     // "\ No newline at end of file" after the old side's last line
	noEOLNew         bool
}

// PatchResult lists what Patch changed.
type PatchResult struct {
	Files []PatchedFile `json:"files"`
}

// PatchedFile is one file Patch changed: "modified", "created" or
// "deleted".
type PatchedFile struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Hunks  int    `json:"hunks"`
	// Guard: as WriteResult.Guard.
	Guard string `json:"guard,omitempty"`
}

// ParsePatch parses a unified diff (diff -u or git diff). Renames, copies
// and binary patches are refused. The "a/" and "b/" prefixes of git's
// headers are removed.
func ParsePatch(diff []byte) ([]FilePatch, error) {
	lines := strings.SplitAfter(string(diff), "\n")
	var out []FilePatch
	git := false
	for i := 0; i < len(lines); {
		l := strings.TrimRight(lines[i], "\n")
		switch {
		case strings.HasPrefix(l, "diff --git "):
			git = true
			i++
		case strings.HasPrefix(l, "rename from"), strings.HasPrefix(l, "copy from"), strings.HasPrefix(l, "GIT binary patch"), strings.HasPrefix(l, "Binary files "):
			return nil, fmt.Errorf("%w: line %d: renames, copies and binary patches are not supported", ErrPatch, i+1)
		case strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			oldPath, err1 := headerPath(l[4:], git, "a/")
			newPath, err2 := headerPath(strings.TrimRight(lines[i+1], "\n")[4:], git, "b/")
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("%w: line %d: %w", ErrPatch, i+1, err)
			}
			fp := FilePatch{Old: oldPath, New: newPath}
			i += 2
			for i < len(lines) && strings.HasPrefix(lines[i], "@@ ") {
				h, next, err := parseHunk(lines, i)
				if err != nil {
					return nil, err
				}
				fp.Hunks = append(fp.Hunks, h)
				i = next
			}
			if len(fp.Hunks) == 0 {
				return nil, fmt.Errorf("%w: line %d: file %q has no hunk", ErrPatch, i+1, fp.New)
			}
			if fp.Old == "" && fp.New == "" {
				return nil, fmt.Errorf("%w: line %d: both sides are /dev/null", ErrPatch, i)
			}
			if fp.Old != "" && fp.New != "" && fp.Old != fp.New {
				return nil, fmt.Errorf("%w: %q -> %q: renames are not supported", ErrPatch, fp.Old, fp.New)
			}
			out = append(out, fp)
		default:
			i++ // commit message, index line, mode lines: ignored
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no file in the patch", ErrPatch)
	}
	return out, nil
}

func headerPath(h string, git bool, prefix string) (string, error) {
	if strings.HasPrefix(h, `"`) {
		// git quotes a name with special characters, C-style; Go's
		// quoting reads the same escapes (\t, \n, \", \\, octal).
		end := strings.LastIndexByte(h, '"')
		u, err := strconv.Unquote(h[:end+1])
		if end <= 0 || err != nil {
			return "", fmt.Errorf("bad quoted file name %s", h)
		}
		h = u
	} else {
		if t := strings.IndexByte(h, '\t'); t >= 0 {
			h = h[:t] // diff -u puts a timestamp after a tab
		}
		h = strings.TrimRight(h, " \r")
	}
	if h == "/dev/null" {
		return "", nil
	}
	if git || strings.HasPrefix(h, prefix) {
		h = strings.TrimPrefix(h, prefix)
	}
	return h, nil
}

func parseHunk(lines []string, i int) (hunk, int, error) {
	var h hunk
	hdr := strings.TrimRight(lines[i], "\n")
	rest, ok := strings.CutPrefix(hdr, "@@ -")
	end := strings.Index(rest, " @@")
	if !ok || end < 0 {
		return h, 0, fmt.Errorf("%w: line %d: bad hunk header %q", ErrPatch, i+1, hdr)
	}
	olds, news, ok := strings.Cut(rest[:end], " +")
	if !ok {
		return h, 0, fmt.Errorf("%w: line %d: bad hunk header %q", ErrPatch, i+1, hdr)
	}
	var err1, err2 error
	h.oldStart, h.oldLen, err1 = rangeOf(olds)
	h.newStart, h.newLen, err2 = rangeOf(news)
	if err1 != nil || err2 != nil {
		return h, 0, fmt.Errorf("%w: line %d: bad hunk header %q", ErrPatch, i+1, hdr)
	}
	i++
	o, n := 0, 0
	last := byte(0)
	for i < len(lines) && (o < h.oldLen || n < h.newLen || strings.HasPrefix(lines[i], `\`)) {
		l := strings.TrimSuffix(lines[i], "\n")
		if strings.HasPrefix(l, `\`) {
			switch last {
			case '-':
				h.noEOLOld = true
			case '+':
				h.noEOLNew = true
			case ' ':
				h.noEOLOld, h.noEOLNew = true, true
			}
			i++
			continue
		}
		if l == "" {
			l = " " // some tools strip the space of an empty context line
		}
		switch l[0] {
		case ' ':
			o++
			n++
		case '-':
			o++
		case '+':
			n++
		default:
			return h, 0, fmt.Errorf("%w: line %d: unexpected %q in a hunk", ErrPatch, i+1, l)
		}
		last = l[0]
		h.lines = append(h.lines, l)
		i++
	}
	if o != h.oldLen || n != h.newLen {
		return h, 0, fmt.Errorf("%w: line %d: hunk is shorter than its header says", ErrPatch, i)
	}
	return h, i, nil
}

func rangeOf(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, ",")
	start, err := strconv.Atoi(a)
	if err != nil {
		return 0, 0, err
	}
	n := 1
	if ok {
		if n, err = strconv.Atoi(b); err != nil {
			return 0, 0, err
		}
	}
	return start, n, nil
}

// apply applies a file's hunks to old, each at its stated line or, when
// the content moved, at the nearest place its old side matches exactly.
func (fp FilePatch) apply(old []byte) ([]byte, error) {
	src := splitLines(old)
	oldEOL := len(old) == 0 || old[len(old)-1] == '\n'
	var out []string
	pos := 0 // next line of src not yet copied
	newEOL := oldEOL
	for k, h := range fp.Hunks {
		var want, repl []string
		for _, l := range h.lines {
			if l[0] != '+' {
				want = append(want, l[1:])
			}
			if l[0] != '-' {
				repl = append(repl, l[1:])
			}
		}
		at := h.oldStart - 1
		if h.oldLen == 0 {
			at = h.oldStart // an insertion after line oldStart
		}
		found := -1
		for d := 0; d <= len(src); d++ {
			if c := at + d; c >= pos && c+len(want) <= len(src) && equalLines(src[c:c+len(want)], want) {
				found = c
				break
			}
			if c := at - d; d > 0 && c >= pos && c+len(want) <= len(src) && equalLines(src[c:c+len(want)], want) {
				found = c
				break
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("%w: %s: hunk %d (@@ -%d,%d) does not match the file", ErrPatch, fp.target(), k+1, h.oldStart, h.oldLen)
		}
		if found+len(want) == len(src) {
			// The hunk reaches the end of the file: it decides the last
			// newline.
			if h.noEOLOld == oldEOL && len(want) > 0 {
				return nil, fmt.Errorf("%w: %s: hunk %d disagrees about the newline at the end of the file", ErrPatch, fp.target(), k+1)
			}
			newEOL = !h.noEOLNew
		}
		out = append(out, src[pos:found]...)
		out = append(out, repl...)
		pos = found + len(want)
	}
	out = append(out, src[pos:]...)
	var b bytes.Buffer
	for i, l := range out {
		b.WriteString(l)
		if i < len(out)-1 || newEOL {
			b.WriteByte('\n')
		}
	}
	return b.Bytes(), nil
}

func (fp FilePatch) target() string {
	if fp.New != "" {
		return fp.New
	}
	return fp.Old
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := strings.Split(string(b), "\n")
	if s[len(s)-1] == "" {
		s = s[:len(s)-1]
	}
	return s
}

func equalLines(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// staged is one file's new content, ready to be renamed into place.
type staged struct {
	path    ConfinedWritePath
	dirfd   int
	name    string
	tmp     string // "" for a deletion
	old     []byte
	oldMode uint32
	own     owner
	existed bool
	made    []string // directories created for a new file
	action  string
	hunks   int
	guard   string // the protected-set row the guard reports
}

// Patch applies a unified diff to files beneath root, all or nothing:
// every target is checked (confined, no symlink on the way, a regular
// single-linked file, or absent for a creation), every hunk is applied in
// memory and every new content is written to a temporary file before any
// file is replaced; a patch that fails at any of these steps changes
// nothing. The renames then replace the files; if one of them fails, the
// files already replaced get their old content back. Each new file is
// bounded by limit (<= 0: DefaultWriteLimit).
func Patch(root *Root, diff []byte, limit int64) (PatchResult, error) {
	if limit <= 0 {
		limit = DefaultWriteLimit
	}
	fps, err := ParsePatch(diff)
	if err != nil {
		return PatchResult{}, err
	}
	var st []*staged
	committed := false
	cleanup := func() {
		for _, s := range st {
			if s.tmp != "" {
				_ = unix.Unlinkat(s.dirfd, s.tmp, 0)
			}
			unix.Close(s.dirfd)
		}
		if !committed {
			for i := len(st) - 1; i >= 0; i-- {
				root.rmdirs(st[i].made)
			}
		}
	}
	seen := map[string]bool{}
	for _, fp := range fps {
		p, err := root.WritePath(fp.target())
		if err != nil {
			cleanup()
			return PatchResult{}, fmt.Errorf("%w: %w", ErrPatch, err)
		}
		if seen[p.rel] {
			cleanup()
			return PatchResult{}, fmt.Errorf("%w: %s appears twice", ErrPatch, p.rel)
		}
		seen[p.rel] = true
		s, err := stage(p, fp, limit)
		if err != nil {
			cleanup()
			return PatchResult{}, err
		}
		st = append(st, s)
	}
	// Commit: rename (or unlink) each; undo on failure.
	for i, s := range st {
		var err error
		if s.tmp == "" {
			err = unix.Unlinkat(s.dirfd, s.name, 0)
		} else {
			err = unix.Renameat(s.dirfd, s.tmp, s.dirfd, s.name)
			if err == nil {
				s.tmp = ""
			}
		}
		if err != nil {
			for _, u := range st[:i] {
				if u.existed {
					_ = replaceAt(u.dirfd, u.path.rel, u.name, u.old, u.oldMode, u.own)
				} else {
					_ = unix.Unlinkat(u.dirfd, u.name, 0)
				}
			}
			cleanup()
			return PatchResult{}, &fs.PathError{Op: "patch", Path: s.path.rel, Err: err}
		}
	}
	committed = true
	res := PatchResult{Files: []PatchedFile{}}
	for _, s := range st {
		res.Files = append(res.Files, PatchedFile{Path: s.path.rel, Action: s.action, Hunks: s.hunks, Guard: s.guard})
	}
	cleanup()
	return res, nil
}

func stage(p ConfinedWritePath, fp FilePatch, limit int64) (*staged, error) {
	create := fp.Old == ""
	dirfd, name, made, reported, err := p.parent(create)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPatch, err)
	}
	s := &staged{path: p, dirfd: dirfd, name: name, made: made, hunks: len(fp.Hunks), guard: reported}
	fail := func(err error) (*staged, error) {
		unix.Close(dirfd)
		p.root.rmdirs(made)
		return nil, err
	}
	mode := uint32(0o644)
	s.own = dirOwner(dirfd)
	if create {
		if _, err := lstatAt(dirfd, name); err != unix.ENOENT {
			return fail(fmt.Errorf("%w: %s: creation of a file that exists", ErrPatch, p.rel))
		}
		s.action = "created"
	} else {
		f, fi, err := openRegularAt(dirfd, p.rel, name, true, false)
		if err != nil {
			return fail(fmt.Errorf("%w: %w", ErrPatch, err))
		}
		if fi.size > limit {
			f.Close()
			return fail(fmt.Errorf("%w: %s: %w", ErrPatch, p.rel, ErrTooLarge))
		}
		s.old = make([]byte, fi.size)
		_, err = f.ReadAt(s.old, 0)
		f.Close()
		if err != nil && fi.size > 0 {
			return fail(fmt.Errorf("%w: read %s: %w", ErrPatch, p.rel, err))
		}
		s.existed, s.oldMode, mode = true, fi.mode&0o1777, fi.mode&0o1777
		if s.own.uid >= 0 {
			s.own = owner{fi.uid, fi.gid}
		}
		s.action = "modified"
	}
	newData, err := fp.apply(s.old)
	if err != nil {
		return fail(err)
	}
	if fp.New == "" {
		if len(newData) != 0 {
			return fail(fmt.Errorf("%w: %s: deletion leaves content behind", ErrPatch, p.rel))
		}
		s.action = "deleted"
		return s, nil
	}
	if int64(len(newData)) > limit {
		return fail(fmt.Errorf("%w: %s: %w", ErrPatch, p.rel, ErrTooLarge))
	}
	tmp, f, err := createTemp(dirfd, p.rel, name, mode)
	if err != nil {
		return fail(err)
	}
	if s.own.uid >= 0 {
		if err := f.Chown(s.own.uid, s.own.gid); err != nil {
			f.Close()
			_ = unix.Unlinkat(dirfd, tmp, 0)
			return fail(err)
		}
	}
	if err := writeSync(f, newData, mode); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fail(err)
	}
	s.tmp = tmp
	return s, nil
}
