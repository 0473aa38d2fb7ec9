// Command acme is the command-line client of a host that sells its API as Acme: the
// main package the cli package's documentation shows, built by the tests.
package main

import (
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/cli"
)

func main() {
	cli.Main(brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME"})
}
