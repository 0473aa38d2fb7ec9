package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	"github.com/tollgate-dev/tollgate/brand"
)

// Main runs the command-line client of brand b (the zero Brand is [brand.Default])
// with the process's arguments, environment and standard streams, and exits with its
// status (see the package documentation). A brand that [brand.Brand.Check] refuses
// exits with status 2 and the reason on standard error, before anything is read.
func Main(b brand.Brand) {
	if err := b.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(exitUsage)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, b.OrDefault(), os.Args[1:], system{
		getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
		stderrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	})
	stop()
	os.Exit(code)
}
