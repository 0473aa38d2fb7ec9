// Command tollgate calls the APIs of a Tollgate service from the command line and
// prints the raw response envelope.
//
//	tollgate <api_id> --<name> <value> ...   call an API (also --name=value)
//	tollgate <api_id> --file PATH [...]      call a file API with a local file
//	tollgate <api_id> --url URL [...]        call a file API with the file's address
//	tollgate <api_id> --batch FILE           call an API once per line of FILE
//	tollgate <api_id> --help                 the API's parameters, types, rules and cost
//	tollgate list                            every API of the catalog
//
// Install it with go install github.com/tollgate-dev/tollgate/cmd/tollgate@latest, or with
// go install ./cmd/tollgate from a clone of the repository; either puts it in GOBIN, or
// GOPATH/bin when GOBIN is not set.
//
// The key is read from TOLLGATE_API_KEY and never printed; the service is
// TOLLGATE_BASE_URL (default http://localhost:8080). The command is package cli with
// Tollgate's names ([brand.Default]); package cli's documentation says how it works,
// and how a host builds the same command under its own name.
package main

import (
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/cli"
)

func main() { cli.Main(brand.Default()) }
