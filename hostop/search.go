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
	"strings"
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
	s := &searcher{ctx: ctx, re: re, o: o, res: SearchResult{Matches: []Match{}}, workers: runtime.GOMAXPROCS(0), need: -1}
	if prefix, complete := re.LiteralPrefix(); prefix != "" {
		s.need = int(rarestByte(prefix))
		if complete {
			s.lit = prefix
		}
	}
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
		if s.workers > 1 {
			s.start()
		}
		err = s.dir(fd, p.rel)
		if s.jobs != nil {
			s.finish()
		}
		if err == nil {
			err = s.err
		}
		if err == nil {
			err = ctx.Err()
		}
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
	err  error // the first file's error that ends the search
	// need is a byte every match contains (the rarest of the pattern's
	// literal prefix), or -1: a file without it is passed over after one
	// vectorised scan instead of the regexp's.
	need int
	// lit is the whole pattern when it is a literal: found without the
	// regexp, from the occurrences of need.
	lit string

	// With more than one worker the walk is a pipeline: this goroutine
	// lists directories and queues their files as jobs; the workers
	// search them; batches are merged here, in walk order, as they
	// complete. Nobody waits at each directory's end.
	workers int
	jobs    chan job
	wg      sync.WaitGroup
	pending []*batch // queued, not merged, in walk order
	queued  int      // files in pending
	stop    atomic.Bool
	free    [][]fileOut
}

// batch is one directory's files, searched by the workers.
type batch struct {
	dir   *os.File // kept open (and referenced) until merged and walked
	fd    int
	rel   string
	names []string
	outs  []fileOut
	left  atomic.Int32
	done  chan struct{}
	// Walker only: the walk has left the directory; the batch is merged.
	walked, merged bool
}

// job is a run of files of one batch, b.names[lo:hi]: a worker takes a
// run rather than one file, so that the workers meet at the queue once
// per run and each opens its files in one directory at a time.
type job struct {
	b      *batch
	lo, hi int
}

// jobFiles is the files of one job at most.
const jobFiles = 32

// maxQueued bounds the files queued ahead of the merge, and
// maxQueuedDirs the directories (each holds its descriptor open until
// merged: a tree of many small directories must not run out of them).
const (
	maxQueued     = 4096
	maxQueuedDirs = 32
)

// fileOut is what searching one file found.
type fileOut struct {
	matches                               []Match
	files, binary, large, linked, special int
	// err ends the search: the file could not be looked at for want of
	// descriptors, which says nothing of the file.
	err error
}

// outOfDescriptors reports the errors that are the process's, not the
// entry's: counting them as skipped entries would hide files.
func outOfDescriptors(err error) bool { return err == unix.EMFILE || err == unix.ENFILE }

// merge adds a file's findings in walk order, applying the bounds.
func (s *searcher) merge(o *fileOut) {
	if s.done {
		return
	}
	if o.err != nil {
		s.err, s.done = o.err, true
		s.stop.Store(true)
		return
	}
	if o.files > 0 && s.res.Files >= s.o.MaxFiles {
		s.res.Truncated, s.done = true, true
		s.stop.Store(true)
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
			s.stop.Store(true)
			return
		}
	}
}

// start starts the workers of a pipelined walk.
func (s *searcher) start() {
	s.jobs = make(chan job, 64)
	for range s.workers {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			// Each worker keeps its buffer for the whole walk: a fresh
			// one per file or directory cost a page fault per 4 KiB.
			var buf []byte
			for j := range s.jobs {
				for i := j.lo; i < j.hi && !s.stop.Load() && s.ctx.Err() == nil; i++ {
					s.openScan(j.b.fd, j.b.rel, j.b.names[i], &buf, &j.b.outs[i])
				}
				if j.b.left.Add(int32(j.lo-j.hi)) == 0 {
					close(j.b.done)
				}
			}
		}()
	}
}

// finish merges what is still queued, stops the workers and closes the
// directories left open.
func (s *searcher) finish() {
	s.mergeReady(true)
	close(s.jobs)
	s.wg.Wait()
}

// queue hands the files of the directory d (open at fd) to the workers,
// then merges the batches at the head of the queue that are complete,
// waiting for the head while too many files are queued.
func (s *searcher) queue(d *os.File, fd int, rel string, names []string) *batch {
	if len(names) == 0 || s.done {
		return nil
	}
	b := &batch{dir: d, fd: fd, rel: rel, names: names, done: make(chan struct{})}
	if n := len(s.free); n > 0 && cap(s.free[n-1]) >= len(names) {
		b.outs, s.free = s.free[n-1][:len(names)], s.free[:n-1]
	} else {
		b.outs = make([]fileOut, len(names))
	}
	b.left.Store(int32(len(names)))
	s.pending = append(s.pending, b)
	s.queued += len(names)
	for lo := 0; lo < len(names); lo += jobFiles {
		s.jobs <- job{b, lo, min(lo+jobFiles, len(names))}
	}
	s.mergeReady(false)
	return b
}

// mergeReady merges complete batches from the head of the queue: all of
// them, waiting for each, when all is set; otherwise those already
// complete, and beyond that only while more than maxQueued files or
// maxQueuedDirs directories wait.
func (s *searcher) mergeReady(all bool) {
	for len(s.pending) > 0 {
		b := s.pending[0]
		if all || s.queued > maxQueued || len(s.pending) > maxQueuedDirs {
			<-b.done
		} else {
			select {
			case <-b.done:
			default:
				return
			}
		}
		for i := range b.outs {
			s.merge(&b.outs[i])
		}
		clear(b.outs)
		s.free = append(s.free, b.outs[:0])
		b.outs = nil
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.queued -= len(b.names)
		b.merged = true
		if b.walked {
			b.dir.Close()
		}
	}
}

// dir searches the directory open at fd (and closes it): its files first,
// then its subdirectories, each in name order. Pipelined, the files are
// queued and the directory is closed once they are merged too.
func (s *searcher) dir(fd int, rel string) error {
	d := os.NewFile(uintptr(fd), rel)
	ents, err := d.ReadDir(-1)
	if err != nil {
		d.Close()
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
	if s.jobs == nil {
		defer d.Close()
		if err := s.files(fd, rel, files); err != nil {
			return err
		}
	} else {
		b := s.queue(d, fd, rel, files)
		defer func() {
			if b == nil || b.merged {
				d.Close()
				return
			}
			b.walked = true
		}()
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
			if outOfDescriptors(err) {
				return fmt.Errorf("open %s: %w", path.Join(rel, name), err)
			}
			s.res.Special++ // replaced meanwhile, or unreadable
			continue
		}
		if err := s.dir(cfd, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

// files searches, one after the other, the regular files names of the
// directory open at fd (a walk with one worker).
func (s *searcher) files(fd int, rel string, names []string) error {
	for _, n := range names {
		if s.done {
			return nil
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		var o fileOut
		s.openScan(fd, rel, n, &s.buf, &o)
		s.merge(&o)
	}
	return nil
}

// openScan opens one entry the directory listed as a regular file and
// searches it. Opened directly (not O_PATH then reopened, as Read does):
// with O_NOFOLLOW (a symlink swapped in fails), O_NONBLOCK (a fifo swapped
// in does not block; fstat then skips it) and O_NOCTTY. A device node
// cannot be swapped in without CAP_MKNOD on this filesystem: rename and
// link do not cross from /dev.
func (s *searcher) openScan(dirfd int, dir, name string, buf *[]byte, o *fileOut) {
	ffd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if outOfDescriptors(err) {
			o.err = fmt.Errorf("open %s: %w", path.Join(dir, name), err)
			return
		}
		o.special++
		return
	}
	defer unix.Close(ffd)
	fi, err := fstat(ffd)
	if err != nil {
		o.special++
		return
	}
	s.scan(ffd, fi, dir, name, buf, o)
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
	s.scan(int(f.Fd()), fi, rel, "", &s.buf, &o)
	return nil
}

// scan searches the file open for reading at fd, whose fstat is fi, into
// o. It keeps at most MaxMatches matches. The file's path is dir joined
// with name (name "": dir alone), made only for a match.
func (s *searcher) scan(fd int, fi fileInfo, dir, name string, bufp *[]byte, o *fileOut) {
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
	if s.need >= 0 && bytes.IndexByte(data, byte(s.need)) < 0 {
		return
	}
	rel := dir
	if name != "" {
		rel = path.Join(dir, name)
	}
	// One FindIndex per matching line: report the line a match starts
	// on, then go on after that line.
	line, counted := 1, 0
	for start := 0; start < len(data); {
		loc := s.find(data[start:])
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

// find returns the leftmost match in data, as regexp.FindIndex does.
func (s *searcher) find(data []byte) []int {
	if s.lit == "" {
		return s.re.FindIndex(data)
	}
	// Every occurrence of the literal holds need at off; a literal
	// occurs where need does and the bytes around it agree.
	off := strings.IndexByte(s.lit, byte(s.need))
	for at := off; at < len(data); {
		j := bytes.IndexByte(data[at:], byte(s.need))
		if j < 0 {
			return nil
		}
		c := at + j - off
		if c+len(s.lit) <= len(data) && string(data[c:c+len(s.lit)]) == s.lit {
			return []int{c, c + len(s.lit)}
		}
		at += j + 1
	}
	return nil
}

// commonBytes lists bytes roughly from most to least frequent in source
// code and prose; a byte not listed counts as rarer than all of them.
const commonBytes = " etaoinsrlhdcupmfgybw\n\t.,_;()=\"kvxjqz'ETAOINSRLHDCUPMFGYBWKVXJQZ/{}:0123456789[]*<>-+!&#"

// rarestByte returns the byte of lit (non-empty) least likely to occur in
// a file, by commonBytes.
func rarestByte(lit string) byte {
	best, rank := lit[0], -1
	for i := 0; i < len(lit); i++ {
		r := strings.IndexByte(commonBytes, lit[i])
		if r < 0 {
			return lit[i]
		}
		if r > rank {
			best, rank = lit[i], r
		}
	}
	return best
}
