// Command badbrand builds the command-line client with a brand whose command has a
// space, which cli.Main refuses.
package main

import (
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/cli"
)

func main() {
	cli.Main(brand.Brand{Name: "Acme", Command: "acme cli", EnvPrefix: "ACME"})
}
