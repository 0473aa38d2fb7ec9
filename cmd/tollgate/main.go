// Command tollgate calls the APIs of a Tollgate service from the command line and
// prints the raw response envelope.
//
//	tollgate <api_id> --<name> <value> ...   call an API (also --name=value)
//	tollgate <api_id> --file PATH [...]      call a file API with a local file
//	tollgate <api_id> --url URL [...]        call a file API with the file's address
//	tollgate <api_id> --help                 the API's parameters, types, rules and cost
//	tollgate list                            every API of the catalog
//
// Install it with go install github.com/tollgate-dev/tollgate/cmd/tollgate@latest, or with
// go install ./cmd/tollgate from a clone of the repository; either puts it in GOBIN, or
// GOPATH/bin when GOBIN is not set.
//
// The key is read from TOLLGATE_API_KEY and never printed; the service is
// TOLLGATE_BASE_URL (default http://localhost:8080). Parameters are checked against the
// catalog's rules before anything is sent, so a mistake costs nothing. A boolean
// parameter may be given without a value (--flag means --flag true); an array parameter
// is given by repeating its option. A value that starts with -- is given as
// --name=value.
//
// The envelope of every answer is printed on standard output, errors included; what
// went wrong is also said on standard error. Exit status: 0 on success, 1 when the
// service refused the call or could not be reached, 2 for a usage or validation
// mistake (including a missing key).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
