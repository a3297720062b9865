//go:build linux

package main

import (
	"context"
	"sync"
)

// keepErrs is how many of a pool's failures runPool keeps for the notes.
const keepErrs = 3

// runPool calls fn jobs times from par goroutines at once and returns how
// many calls failed, with the first few errors. Once ctx is done the
// workers take no further job (a call under way finishes).
func runPool(ctx context.Context, par, jobs int, fn func() error) (fails int, first []error) {
	work := make(chan struct{}, jobs)
	for range jobs {
		work <- struct{}{}
	}
	close(work)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				if ctx.Err() != nil {
					return
				}
				if err := fn(); err != nil {
					mu.Lock()
					fails++
					if len(first) < keepErrs {
						first = append(first, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return fails, first
}
