// Package cli is the command-line client of a service: it calls the service's APIs
// and prints the raw response envelope. Command tollgate is this client with
// Tollgate's names; a host that sells its API under a brand of its own builds the
// same client under its names with a main package of a few lines:
//
//	package main // cmd/acme
//
//	import (
//		"github.com/tollgate-dev/tollgate/brand"
//		"github.com/tollgate-dev/tollgate/cli"
//	)
//
//	func main() {
//		cli.Main(brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME"})
//	}
//
// That command, built as acme, reads ACME_API_KEY and ACME_BASE_URL (never Tollgate's
// variables), names itself acme in its help and messages, and otherwise works as
// described here, where the names are those of the default brand (TOLLGATE_API_KEY,
// TOLLGATE_BASE_URL, tollgate):
//
//	tollgate <api_id> --<name> <value> ...   call an API (also --name=value)
//	tollgate <api_id> --file PATH [...]      call a file API with a local file
//	tollgate <api_id> --url URL [...]        call a file API with the file's address
//	tollgate <api_id> --help                 the API's parameters, types, rules and cost
//	tollgate list                            every API of the catalog
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
//
// # Batches
//
//	tollgate <api_id> --batch FILE           call an API once per line of FILE
//
// FILE (- for standard input) is JSON Lines: each line one JSON object of an item's
// parameters, as the API's JSON body takes them ({"text": "hello"}); blank lines are
// skipped. The command reads the plan's batch size (batch_max_items of
// GET /v1/analytics), sends the items in batches of that size, one request each
// (POST /v1/<api_id>/batch), and writes one result line per item on standard output,
// in the order of the input: the item's envelope, {"status", "error", "data", "code"
// on failure, "credits"}. A line that is not a JSON object of valid parameters is not
// sent: its result line is an error envelope with code invalid_input, and standard error
// names the line (the first ten such lines).
//
// Each batch carries an Idempotency-Key of its own, so that a batch whose answer was
// lost is sent again without being run or charged twice; one refused for the rate or
// concurrency limit is sent again when the service says. (A service whose host keeps
// no answers for keys refuses them: the command then says so once and sends its
// batches without a key, and does not send again a batch whose answer was lost.) When
// standard error is a terminal, a progress line there shows the items done, the credits
// spent and the errors; on a pipe or a file, nothing is written there but the reports of
// invalid lines and of what went wrong. When a batch cannot be run (no credits left, the
// key refused, the service unreachable), the run stops: standard output has the results
// of the lines before that batch, and standard error says which line to go on from.
//
// Exit status of a batch run: 0 when every item succeeded, 1 when some item failed or
// the run stopped, 2 for a usage mistake (no key, a file that cannot be opened, other
// options given with --batch).
package cli
