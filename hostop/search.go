//go:build linux

package hostop

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

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
// directory): in each directory its files in name order (searched on
// GOMAXPROCS goroutines, merged in order), then its subdirectories in name
// order. It never follows a symlink, skips every
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
	s := &searcher{ctx: ctx, re: re, o: o, res: SearchResult{Matches: []Match{}}, workers: runtime.GOMAXPROCS(0)}
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
	ctx     context.Context
	re      *regexp.Regexp
	o       SearchOptions
	res     SearchResult
	buf     []byte
	bufs    [][]byte // one per worker of files, kept across directories
	done    bool
	workers int
}

// fileOut is what searching one file found.
type fileOut struct {
	matches                               []Match
	files, binary, large, linked, special int
}

// merge adds a file's findings in walk order, applying the bounds.
func (s *searcher) merge(o *fileOut) {
	if s.done {
		return
	}
	if o.files > 0 && s.res.Files >= s.o.MaxFiles {
		s.res.Truncated, s.done = true, true
		return
	}
	s.res.Files += o.files
	s.res.Binary += o.binary
	s.res.Large += o.large
	s.res.Linked += o.linked
	s.res.Special += o.special
	for _, m := range o.matches {
		s.res.Matches = append(s.res.Matches, m)
		if len(s.res.Matches) >= s.o.MaxMatches {
			s.res.Truncated, s.done = true, true
			return
		}
	}
}

// dir searches the directory open at fd (and closes it): its files first,
// several at a time, then its subdirectories, each in name order.
func (s *searcher) dir(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("readdir %s: %w", rel, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	var files, dirs []string
	for _, e := range ents {
		switch t := e.Type(); {
		case t.IsDir():
			if e.Name() != ".git" {
				dirs = append(dirs, e.Name())
			}
		case t.IsRegular():
			files = append(files, e.Name())
		case t&os.ModeSymlink != 0:
			// Never followed.
		default:
			s.res.Special++
		}
	}
	if err := s.files(fd, rel, files); err != nil {
		return err
	}
	for _, name := range dirs {
		if s.done {
			return nil
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			s.res.Special++ // replaced meanwhile, or unreadable
			continue
		}
		if err := s.dir(cfd, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

// files searches the regular files names of the directory open at fd, on
// up to s.workers goroutines, and merges the findings in name order.
func (s *searcher) files(fd int, rel string, names []string) error {
	if len(names) == 0 || s.done {
		return nil
	}
	outs := make([]fileOut, len(names))
	w := min(s.workers, len(names))
	if w <= 1 {
		for i, n := range names {
			if err := s.ctx.Err(); err != nil {
				return err
			}
			s.openScan(fd, n, path.Join(rel, n), &s.buf, &outs[i])
			s.merge(&outs[i])
			outs[i] = fileOut{}
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	if len(s.bufs) < w {
		s.bufs = append(s.bufs, make([][]byte, w-len(s.bufs))...)
	}
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each worker keeps its buffer across directories: a fresh
			// one per directory cost a page fault per 4 KiB of it.
			buf := &s.bufs[k]
			for {
				i := int(next.Add(1) - 1)
				if i >= len(names) || s.ctx.Err() != nil {
					return
				}
				s.openScan(fd, names[i], path.Join(rel, names[i]), buf, &outs[i])
			}
		}()
	}
	wg.Wait()
	if err := s.ctx.Err(); err != nil {
		return err
	}
	for i := range outs {
		s.merge(&outs[i])
	}
	return nil
}

// openScan opens one entry the directory listed as a regular file and
// searches it. Opened directly (not O_PATH then reopened, as Read does):
// with O_NOFOLLOW (a symlink swapped in fails), O_NONBLOCK (a fifo swapped
// in does not block; fstat then skips it) and O_NOCTTY. A device node
// cannot be swapped in without CAP_MKNOD on this filesystem: rename and
// link do not cross from /dev.
func (s *searcher) openScan(dirfd int, name, rel string, buf *[]byte, o *fileOut) {
	ffd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		o.special++
		return
	}
	defer unix.Close(ffd)
	fi, err := fstat(ffd)
	if err != nil {
		o.special++
		return
	}
	s.scan(ffd, fi, rel, buf, o)
}

// filePath searches the file open (O_PATH) at pfd after checking what it
// is.
func (s *searcher) filePath(pfd int, fi fileInfo, rel string) error {
	var o fileOut
	defer s.merge(&o)
	if fi.mode&unix.S_IFMT != unix.S_IFREG {
		o.special++
		return nil
	}
	f, err := reopen(pfd, rel)
	if err != nil {
		o.special++
		return nil
	}
	defer f.Close()
	s.scan(int(f.Fd()), fi, rel, &s.buf, &o)
	return nil
}

// scan searches the file open for reading at fd, whose fstat is fi, into
// o. It keeps at most MaxMatches matches.
func (s *searcher) scan(fd int, fi fileInfo, rel string, bufp *[]byte, o *fileOut) {
	switch {
	case fi.mode&unix.S_IFMT != unix.S_IFREG:
		o.special++
		return
	case fi.nlink > 1:
		o.linked++
		return
	case fi.size > s.o.MaxFileSize:
		o.large++
		return
	}
	if int64(cap(*bufp)) < fi.size+1 {
		*bufp = make([]byte, max(fi.size+1, 64<<10))
	}
	// Read what fstat saw, and no further: a file that grew meanwhile is
	// searched as it was (a read to EOF would cost a second read per file,
	// on every file).
	buf := (*bufp)[:fi.size]
	n := 0
	for n < len(buf) {
		k, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			o.special++
			return
		}
		if k == 0 {
			break
		}
		n += k
	}
	data := buf[:n]
	o.files++
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		o.binary++
		return
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
		o.matches = append(o.matches, Match{Path: rel, Line: line, Text: string(text)})
		if len(o.matches) >= s.o.MaxMatches {
			return
		}
		counted = at
		start = le + 1
	}
}
