// Command tollgate-gen generates one client package per API of a Tollgate catalog, for
// Go, JavaScript (an ES module with TypeScript declarations, no dependencies, Node 18
// or later), Python (3.9 or later, standard library only), .NET (a NuGet package, C#
// for netstandard2.0, HttpClient and Newtonsoft.Json), Java (a Maven project, Java 8
// source for Android, HttpURLConnection and Jackson), PHP (a Composer package, PHP 8.1
// or later, PSR-4, the curl extension) and Dart (a pub package, Dart 3, dart:io).
//
//	tollgate-gen -catalog http://localhost:8080/v1/catalog -out clients
//	tollgate-gen -catalog catalog.json -out clients -lang js,python
//
// Install it with go install github.com/tollgate-dev/tollgate/cmd/tollgate-gen@latest, or with
// go install ./cmd/tollgate-gen from a clone of the repository; either puts it in GOBIN, or
// GOPATH/bin when GOBIN is not set.
//
// The catalog is the answer of GET /v1/catalog, read from the service or from a saved
// copy. The packages go to DIR/go/<package>, and to DIR/<language>/<api_id> for the
// others.
// Each has the same two-step shape (construct with a key, then execute the call), typed
// parameters and results, the catalog's validation rules (checked before anything is
// sent), the auth-mode header of its ecosystem, a README with an example, and a semver
// version.
//
// # Versions
//
// Each package records the definition it was generated from in api.json. When the
// generator runs again over the same directory it compares the new definition with that
// one and sets the semantic version from the difference: unchanged for the same
// definition, a patch for documentation or cost, a minor version for added optional
// parameters or result fields, and a major version for anything that changes an
// existing shape. A new package starts at 1.0.0. Generation is deterministic: the same
// catalog and directory give the same bytes.
//
// # Flags
//
//	-catalog URL|FILE   the catalog (required)
//	-out DIR            where the packages go (required)
//	-lang LIST          languages, comma-separated: go, js, python, dotnet, java,
//	                    php, dart (default all)
//	-base-url URL       the service the packages call by default (default: the
//	                    catalog's service, or http://localhost:8080 for a file)
//	-go-import PATH     import path of the directory holding the Go packages
//	                    (default example.com/tollgate/clients)
//	-npm-scope SCOPE    npm scope of the JavaScript packages (default @tollgate)
//	-python-prefix P    prefix of the Python distributions and modules (default tollgate)
//	-dotnet-namespace N namespace of the .NET packages' namespaces and NuGet ids
//	                    (default Tollgate: Tollgate.Hash)
//	-java-package P     Java package and Maven group of the Java packages
//	                    (default dev.tollgate.clients)
//	-dart-prefix P      prefix of the Dart packages' names (default tollgate:
//	                    tollgate_hash)
//	-php-namespace NS   namespace of the PHP packages' namespaces, which also names
//	                    their Composer vendor (default Tollgate: Tollgate\Hash, tollgate/hash)
//	-brand-command CMD  the operator's brand (package brand): its command, which names
//	                    the packages' base error class (default tollgate: TollgateError,
//	                    TollgateException; acme gives AcmeError, AcmeException)
//	-brand-env PREFIX   the brand's prefix of environment variables: the packages'
//	                    examples and messages read the key from PREFIX_API_KEY (default
//	                    TOLLGATE: TOLLGATE_API_KEY)
//
// A host that sells its API under a brand of its own passes the brand's command and
// prefix (those of its brand.Brand). The defaults of the names above then follow the
// command: -brand-command acme gives example.com/acme/clients, @acme, acme, Acme,
// dev.acme.clients, Acme and acme; a flag above still sets its name.
// Exit status: 0 on success, 1 when the catalog cannot be read or the packages cannot
// be written, 2 for a usage mistake.
//
// The generator itself is package internal/clientgen, which the web dashboard also
// uses to show each API's example call in every language exactly as the generated
// README has it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate-dev/tollgate/internal/clientgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := clientgen.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
