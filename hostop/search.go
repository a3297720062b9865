package hostop

import (
	"bytes"
	"context"
	"fmt"
	"io"
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
			pfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			fi, err := fstat(pfd)
			if err == nil {
				err = s.filePath(pfd, fi, child)
			}
			unix.Close(pfd)
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

// filePath searches the file open (O_PATH) at pfd after checking what it is.
func (s *searcher) filePath(pfd int, fi fileInfo, rel string) error {
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
	f, err := reopen(pfd, rel)
	if err != nil {
		s.res.Special++
		return nil
	}
	defer f.Close()
	if int64(cap(s.buf)) < fi.size+1 {
		s.buf = make([]byte, fi.size+1)
	}
	n, err := io.ReadFull(f, s.buf[:fi.size+1])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		s.res.Special++
		return nil
	}
	if int64(n) > fi.size {
		n = int(fi.size) // grew meanwhile: stop at the size fstat saw
	}
	data := s.buf[:n]
	s.res.Files++
	if bytes.IndexByte(data[:min(len(data), 8192)], 0) >= 0 {
		s.res.Binary++
		return nil
	}
	loc := s.re.FindIndex(data)
	if loc == nil {
		return nil
	}
	line := 1 + bytes.Count(data[:loc[0]], []byte{'\n'})
	start := bytes.LastIndexByte(data[:loc[0]], '\n') + 1
	for start <= len(data) {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start
		}
		if s.re.Match(data[start:end]) {
			text := data[start:end]
			if len(text) > s.o.MaxLine {
				text = text[:s.o.MaxLine]
			}
			s.res.Matches = append(s.res.Matches, Match{Path: rel, Line: line, Text: string(text)})
			if len(s.res.Matches) >= s.o.MaxMatches {
				s.res.Truncated, s.done = true, true
				return nil
			}
		}
		if end == len(data) {
			break
		}
		start = end + 1
		line++
		// Jump to the next match instead of testing every line.
		next := s.re.FindIndex(data[start:])
		if next == nil {
			break
		}
		skip := bytes.Count(data[start:start+next[0]], []byte{'\n'})
		if skip > 0 {
			line += skip
			start += bytes.LastIndexByte(data[start:start+next[0]], '\n') + 1
		}
	}
	return nil
}
