//go:build linux

// Command probe is the escape suite's attack binary: internal/probe, the
// same attacks `confine selftest` runs. See that package for the contract.
package main

import (
	"os"

	"github.com/confine-sandbox/confine/internal/probe"
)

func main() { os.Exit(probe.Main(os.Args[1:])) }
