package hostop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"

	"golang.org/x/sys/unix"
)

// SearchOptions bound a Search. Zero fields take the defaults.
type SearchOptions struct {
	// MaxMatches stops the search after this many matching lines
	// (default 1000); the result is then Truncated.
	MaxMatches int
	// MaxFileSize skips larger files (default 8 MiB).
	MaxFileSize int64
	// MaxLine cuts a matching line's text to this many bytes (default 512).
	MaxLine int
	// MaxFiles stops after looking at this many files (default 200,000).
	MaxFiles int
}

// Match is one matching line; Line counts from 1.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is what Search found and what it passed over.
type SearchResult struct {
	Matches   []Match `json:"matches"`
	Files     int     `json:"files_searched"`
	Binary    int     `json:"skipped_binary"`
	Large     int     `json:"skipped_large"`
	Linked    int     `json:"skipped_multiply_linked"`
	Special   int     `json:"skipped_special"`
	Truncated bool    `json:"truncated"`
}

// Search looks for re in every regular file beneath p (a file or a
// directory), in name order. It never follows a symlink, skips every
// directory named .git, binary files (a NUL byte in the first 8 KiB),
// files larger than MaxFileSize, files with more than one hard link and
// anything not a regular file, and counts what it skipped.
func Search(ctx context.Context, p ConfinedReadPath, re *regexp.Regexp, o SearchOptions) (SearchResult, error) {
	if p.root == nil {
		return SearchResult{}, fmt.Errorf("%w: zero ConfinedReadPath", ErrInvalidPath)
	}
	if o.MaxMatches <= 0 {
		o.MaxMatches = 1000
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = 8 << 20
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 512
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 200000
	}
	s := &searcher{ctx: ctx, re: re, o: o, res: SearchResult{Matches: []Match{}}, buf: make([]byte, 64<<10)}
	pfd, err := openat2(p.root.fd, p.rel, p.rel, unix.O_PATH, false)
	if err != nil {
		return SearchResult{}, err
	}
	fi, err := fstat(pfd)
	if err != nil {
		unix.Close(pfd)
		return SearchResult{}, err
	}
	if fi.mode&unix.S_IFMT == unix.S_IFDIR {
		unix.Close(pfd)
		fd, err := openat2(p.root.fd, p.rel, p.rel, unix.O_RDONLY|unix.O_DIRECTORY, false)
		if err != nil {
			return SearchResult{}, err
		}
		err = s.dir(fd, p.rel)
		return s.res, err
	}
	err = s.filePath(pfd, fi, p.rel)
	unix.Close(pfd)
	return s.res, err
}

type searcher struct {
	ctx  context.Context
	re   *regexp.Regexp
	o    SearchOptions
	res  SearchResult
	buf  []byte
	done bool
}

// dir searches the directory open at fd (and closes it).
func (s *searcher) dir(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("readdir %s: %w", rel, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		if s.done {
			return nil
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		name := e.Name()
		child := path.Join(rel, name)
		switch t := e.Type(); {
		case t.IsDir():
			if name == ".git" {
				continue
			}
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				s.res.Special++ // replaced meanwhile, or unreadable
				continue
			}
			if err := s.dir(cfd, child); err != nil {
				return err
			}
		case t.IsRegular():
			// Opened directly (not O_PATH then reopened, as Read does):
			// only an entry the directory lists as a regular file is
			// opened, with O_NOFOLLOW (a symlink swapped in fails),
			// O_NONBLOCK (a fifo swapped in does not block; fstat then
			// skips it) and O_NOCTTY. A device node cannot be swapped in
			// without CAP_MKNOD on this filesystem: rename and link do
			// not cross from /dev.
			ffd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			if err != nil {
				s.res.Special++
				continue
			}
			fi, err := fstat(ffd)
			if err == nil {
				err = s.file(ffd, fi, child)
			}
			unix.Close(ffd)
			if err != nil {
				return err
			}
		case t&os.ModeSymlink != 0:
			// Never followed.
		default:
			s.res.Special++
		}
	}
	return nil
}

// filePath searches the file open (O_PATH) at pfd after checking what it
// is.
func (s *searcher) filePath(pfd int, fi fileInfo, rel string) error {
	if fi.mode&unix.S_IFMT != unix.S_IFREG {
		s.res.Special++
		return nil
	}
	f, err := reopen(pfd, rel)
	if err != nil {
		s.res.Special++
		return nil
	}
	defer f.Close()
	return s.file(int(f.Fd()), fi, rel)
}

// file searches the file open for reading at fd, whose fstat is fi.
func (s *searcher) file(fd int, fi fileInfo, rel string) error {
	if s.res.Files >= s.o.MaxFiles {
		s.res.Truncated, s.done = true, true
		return nil
	}
	switch {
	case fi.mode&unix.S_IFMT != unix.S_IFREG:
		s.res.Special++
		return nil
	case fi.nlink > 1:
		s.res.Linked++
		return nil
	case fi.size > s.o.MaxFileSize:
		s.res.Large++
		return nil
	}
	if int64(cap(s.buf)) < fi.size+1 {
		s.buf = make([]byte, fi.size+1)
	}
	buf := s.buf[:fi.size+1]
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			s.res.Special++
			return nil
		}
		if k == 0 {
			break
		}
		n += k
	}
	if int64(n) > fi.size {
		n = int(fi.size) // grew meanwhile: stop at the size fstat saw
	}
	data := buf[:n]
	s.res.Files++
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		s.res.Binary++
		return nil
	}
	// One FindIndex per matching line: report the line a match starts
	// on, then go on after that line.
	line, counted := 1, 0
	for start := 0; start < len(data); {
		loc := s.re.FindIndex(data[start:])
		if loc == nil {
			break
		}
		at := start + loc[0]
		line += bytes.Count(data[counted:at], []byte{'\n'})
		ls := bytes.LastIndexByte(data[:at], '\n') + 1
		le := bytes.IndexByte(data[at:], '\n')
		if le < 0 {
			le = len(data)
		} else {
			le += at
		}
		text := data[ls:le]
		if len(text) > s.o.MaxLine {
			text = text[:s.o.MaxLine]
		}
		s.res.Matches = append(s.res.Matches, Match{Path: rel, Line: line, Text: string(text)})
		if len(s.res.Matches) >= s.o.MaxMatches {
			s.res.Truncated, s.done = true, true
			return nil
		}
		counted = at
		start = le + 1
	}
	return nil
}
