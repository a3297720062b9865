// Command confine runs one untrusted command in a sandbox built from
// unprivileged kernel facilities. See `confine --help`.
package main

import (
	"os"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/cli"
)

func main() {
	confine.Init()
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
