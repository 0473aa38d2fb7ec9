package tollgate

import (
	"context"
	"net/netip"

	"github.com/tollgate-dev/tollgate/internal/safefetch"
)

// SetFetchResolver makes s resolve the hosts of file urls with resolve instead of DNS,
// its fetcher otherwise configured by o, as New configures it. A test calls it before
// s serves any call.
func SetFetchResolver(s *Service, o FetchOptions, resolve func(ctx context.Context, host string) ([]netip.Addr, error)) {
	fo := fetcherOptions(o, s.log)
	fo.Resolve = resolve
	s.fetcher = safefetch.New(fo)
}
