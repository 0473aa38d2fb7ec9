// Command tollgate-server runs one instance of a Tollgate deployment on PostgreSQL and
// Redis, serving the sample catalog (package examples/apis): every door on -addr, the
// operators' endpoints on -ops-addr.
//
//	tollgate-server migrate     # once per release, before the instances start
//	tollgate-server serve
//
// A deployment that serves its own APIs builds its own command the same way, with
// package server and its catalog:
//
//	func main() { os.Exit(server.Main(os.Args[1:], myapis.All()...)) }
//
// tollgate-server serve -h lists the settings; docs/server.md describes them.
package main

import (
	"os"

	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/server"
)

func main() { os.Exit(server.Main(os.Args[1:], apis.All()...)) }
