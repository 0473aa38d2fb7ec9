package safefetch

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults used for zero fields of [Options], and the URL length limit.
const (
	DefaultMaxRedirects       = 3
	DefaultTimeout            = 10 * time.Second
	DefaultMaxBytes     int64 = 10 << 20
	DefaultUserAgent          = "tollgate-fetch/1"
	// MaxURLLength is the longest URL, in bytes, that is accepted, both as
	// given and as a redirect target.
	MaxURLLength = 2048
)

// Options configures a [Fetcher]. The zero value, like a nil *Options, gives
// the safe defaults.
type Options struct {
	// AllowPrivate turns the address policy off, so that loopback, private
	// and every other blocked address can be fetched. It is for local
	// development and tests only. Default false.
	AllowPrivate bool
	// MaxRedirects is how many redirects a fetch follows. Zero means
	// DefaultMaxRedirects (3); a negative value refuses every redirect.
	MaxRedirects int
	// Timeout bounds a whole fetch, redirects and body included, and the
	// name resolution of a Check, or of all the hosts of a CheckAll together.
	// Zero or negative means DefaultTimeout (10s).
	Timeout time.Duration
	// MaxBytes is the size cap used when Fetch is called with maxBytes <= 0.
	// Zero or negative means DefaultMaxBytes (10 MiB).
	MaxBytes int64
	// UserAgent is sent with every request. Empty means DefaultUserAgent
	// ("tollgate-fetch/1").
	UserAgent string
	// Logger receives what a refusal of a destination does not tell the user (see
	// [Error]): why the host was refused, and the addresses it resolved to. Refusals
	// are the caller's doing, so they are logged at Info (a name that does not exist)
	// or Warn (a blocked address, a failing resolver), never Error. Nil means
	// slog.Default().
	Logger *slog.Logger

	// Resolve returns the addresses of a host name; it is never called for an
	// IP literal. It should return once ctx is done: a fetch waits for it
	// (CheckAll does not). Nil means net.DefaultResolver. Tests give their
	// own, so that no lookup reaches DNS.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// blocked replaces Blocked as the address policy in tests.
	blocked func(netip.Addr) (string, bool)
}

// File is a downloaded file.
type File struct {
	// Data is the response body, at most the size cap long.
	Data []byte
	// ContentType is the response's Content-Type header; it may be empty.
	ContentType string
	// URL is the final URL, after redirects.
	URL string
	// Name is the last segment of the final URL's path, unescaped and reduced
	// to letters, digits, '.', '-' and '_' (others become '_'), without
	// leading or trailing dots. It may be empty.
	Name string
}

// Fetcher downloads files from public internet URLs. Create one with [New];
// it is safe for concurrent use and shares one HTTP client and connection
// pool among all fetches.
type Fetcher struct {
	allowPrivate bool
	maxRedirects int
	timeout      time.Duration
	maxBytes     int64
	userAgent    string
	resolve      func(ctx context.Context, host string) ([]netip.Addr, error)
	blocked      func(netip.Addr) (string, bool)
	dialer       *net.Dialer
	client       *http.Client
	log          *slog.Logger
}

// New returns a Fetcher configured by opts, which may be nil.
func New(opts *Options) *Fetcher {
	var o Options
	if opts != nil {
		o = *opts
	}
	f := &Fetcher{
		allowPrivate: o.AllowPrivate,
		maxRedirects: o.MaxRedirects,
		timeout:      o.Timeout,
		maxBytes:     o.MaxBytes,
		userAgent:    o.UserAgent,
		resolve:      o.Resolve,
		blocked:      o.blocked,
		log:          o.Logger,
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	switch {
	case f.maxRedirects == 0:
		f.maxRedirects = DefaultMaxRedirects
	case f.maxRedirects < 0:
		f.maxRedirects = 0
	}
	if f.timeout <= 0 {
		f.timeout = DefaultTimeout
	}
	if f.maxBytes <= 0 {
		f.maxBytes = DefaultMaxBytes
	}
	if f.userAgent == "" {
		f.userAgent = DefaultUserAgent
	}
	if f.resolve == nil {
		f.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if f.blocked == nil {
		f.blocked = Blocked
	}
	f.dialer = &net.Dialer{
		Timeout:   f.timeout,
		KeepAlive: 30 * time.Second,
		Control:   f.control,
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would connect on our behalf, unchecked
		DialContext:            f.dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    f.timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f
}

// Transport returns the Fetcher's transport, for a caller that sends requests of its
// own (a POST, its own headers) under the Fetcher's address policy: every connection
// it opens is checked at dial time as [Fetcher.Fetch]'s are (see the package
// documentation), never through a proxy, with the Fetcher's timeout on the connection
// and the TLS handshake. The rest is the caller's: the URL (see [ValidateURL]), the
// request's timeout, redirects (its client's CheckRedirect), the size of what it
// reads. A connection the policy refuses fails with an [*Error] the client's error
// wraps (errors.As finds it), of Reason ReasonBlocked or ReasonNetwork, whose message
// does not name the address. It is shared by every request of the Fetcher's.
func (f *Fetcher) Transport() http.RoundTripper { return f.client.Transport }

// ValidateURL checks what [Fetcher.Fetch] checks of a URL without the network: an
// absolute http or https URL with a host, a valid port, no credentials, at most
// [MaxURLLength] bytes. Its error is an [*Error] naming the URL, of Reason
// ReasonBadURL or ReasonScheme.
func ValidateURL(rawURL string) error {
	if _, e := parseURL(rawURL); e != nil {
		return e.forURL(rawURL, "")
	}
	return nil
}

// LookupParallelism is how many host names [Fetcher.CheckAll] resolves at once.
const LookupParallelism = 8

// Check validates rawURL and resolves and checks its host, without
// connecting to it. A nil result does not promise that Fetch will succeed:
// Fetch checks every connection again when it dials. Check is CheckAll of the
// one URL.
func (f *Fetcher) Check(ctx context.Context, rawURL string) error {
	return f.CheckAll(ctx, []string{rawURL})[0]
}

// CheckAll checks many URLs as [Fetcher.Check] checks one, and returns their
// errors in their order: nil for a URL that passes, an [*Error] naming the
// URL otherwise, the one Check would give it.
//
// Each distinct host, as written in the URLs, is resolved once, at most
// [LookupParallelism] at a time, and all of them within one [Options.Timeout]
// (not one per URL): CheckAll returns by then, whatever the resolver does.
// Every URL whose host was not resolved in that time (its lookup had not
// answered, or had not started) fails with [ReasonTimeout]; a canceled ctx
// fails the unresolved ones with [ReasonCanceled]. A URL that is not valid
// fails on its own, without a lookup.
func (f *Fetcher) CheckAll(ctx context.Context, urls []string) []error {
	errs := make([]error, len(urls))
	hostOf := make([]string, len(urls)) // "" for a URL that is not valid
	var names []string                  // the distinct host names to resolve
	verdicts := make(map[string]*Error) // the outcome of each distinct host
	for i, raw := range urls {
		u, e := parseURL(raw)
		if e != nil {
			errs[i] = e.forURL(raw, "")
			continue
		}
		host := u.Hostname()
		hostOf[i] = host
		if _, seen := verdicts[host]; seen {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil {
			verdicts[host] = f.checkAddrs(host, []netip.Addr{a})
			continue
		}
		verdicts[host] = nil
		names = append(names, host)
	}
	f.resolveAll(ctx, names, verdicts)
	for i, host := range hostOf {
		if e := verdicts[host]; host != "" && e != nil {
			errs[i] = e.forURL(urls[i], "")
		}
	}
	return errs
}

// A hostVerdict is the outcome of the check of one host name: nil if it may
// be fetched from.
type hostVerdict struct {
	host string
	err  *Error
}

// resolveAll resolves and checks the host names, at most LookupParallelism
// at a time and all within the Fetcher's timeout, and records the outcome of
// each in verdicts. It returns by the timeout even if lookups have not: those
// are canceled, and their hosts fail as unresolved.
func (f *Fetcher) resolveAll(ctx context.Context, names []string, verdicts map[string]*Error) {
	if len(names) == 0 {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	// Buffered for every host, so that no lookup that ends after the timeout
	// waits to be heard.
	done := make(chan hostVerdict, len(names))
	var next atomic.Int64
	work := func() {
		for tctx.Err() == nil {
			i := int(next.Add(1) - 1)
			if i >= len(names) {
				return
			}
			done <- hostVerdict{names[i], f.checkHost(ctx, tctx, names[i])}
		}
	}
	for range min(LookupParallelism, len(names)) {
		go work()
	}
	pending := make(map[string]bool, len(names))
	for _, n := range names {
		pending[n] = true
	}
	for len(pending) > 0 {
		var v hostVerdict
		select {
		case v = <-done:
		case <-tctx.Done():
			select {
			case v = <-done: // one that ended meanwhile still counts
			default:
				for host := range pending {
					verdicts[host] = f.unresolved(ctx, tctx, host)
				}
				return
			}
		}
		verdicts[v.host] = v.err
		delete(pending, v.host)
	}
}

// checkHost resolves the host name host under tctx, derived from parent with
// the Fetcher's timeout, and applies the address policy to its addresses.
func (f *Fetcher) checkHost(parent, tctx context.Context, host string) *Error {
	addrs, e := f.lookup(tctx, host)
	if e != nil {
		if tctx.Err() != nil {
			return f.unresolved(parent, tctx, host)
		}
		return e
	}
	return f.checkAddrs(host, addrs)
}

// unresolved is the error of a host name whose lookup did not end before
// tctx, derived from parent with the Fetcher's timeout, was done.
func (f *Fetcher) unresolved(parent, tctx context.Context, host string) *Error {
	if parent.Err() != nil {
		return f.contextError(parent, tctx)
	}
	return newError(ReasonTimeout, tctx.Err(), "the host %q could not be resolved within %s; try again later, or use a url on a host whose name resolves promptly", host, f.timeout)
}

// Fetch downloads rawURL, following redirects, and returns the body if the
// final status is 2xx and the body is at most maxBytes long. maxBytes <= 0
// means the Fetcher's default cap. Every error is an [*Error].
func (f *Fetcher) Fetch(ctx context.Context, rawURL string, maxBytes int64) (*File, error) {
	if maxBytes <= 0 {
		maxBytes = f.maxBytes
	}
	u, e := parseURL(rawURL)
	if e != nil {
		return nil, e.forURL(rawURL, "")
	}
	tctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(tctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, newError(ReasonBadURL, err, "the url cannot be used").forURL(rawURL, "")
	}
	req.Header.Set("User-Agent", f.userAgent)
	firstURL := req.URL.String()

	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.requestError(ctx, tctx, err).forURL(rawURL, firstURL)
	}
	defer resp.Body.Close()
	finalURL := resp.Request.URL.String()
	fail := func(e *Error) (*File, error) {
		e.target = finalURL
		return nil, e.forURL(rawURL, firstURL)
	}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := newError(ReasonStatus, nil, "the server answered %s instead of the file; check that the url is right and the file is public",
			strings.TrimSpace(strconv.Itoa(resp.StatusCode)+" "+http.StatusText(resp.StatusCode)))
		e.StatusCode = resp.StatusCode
		return fail(e)
	}
	if resp.ContentLength > maxBytes {
		return fail(newError(ReasonTooLarge, nil, "the file is %d bytes, over the limit of %d bytes", resp.ContentLength, maxBytes))
	}
	limit := maxBytes
	if limit < math.MaxInt64 {
		limit++ // read one byte more than allowed to detect an oversized body
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return fail(f.requestError(ctx, tctx, err))
	}
	if int64(len(data)) > maxBytes {
		return fail(newError(ReasonTooLarge, nil, "the file is larger than the limit of %d bytes", maxBytes))
	}
	return &File{
		Data:        data,
		ContentType: resp.Header.Get("Content-Type"),
		URL:         finalURL,
		Name:        fileName(resp.Request.URL),
	}, nil
}

// checkRedirect is the http.Client's CheckRedirect: it limits the number of
// redirects and validates each target before it is requested.
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.maxRedirects {
		if f.maxRedirects == 0 {
			return newError(ReasonTooManyRedirects, nil, "the server redirected, and redirects are not followed; use the final url of the file")
		}
		return newError(ReasonTooManyRedirects, nil, "the server redirected more than %d times; use the final url of the file", f.maxRedirects)
	}
	target := req.URL.String()
	var e *Error
	if len(target) > MaxURLLength {
		e = newError(ReasonBadURL, nil, "the url is %d bytes long, over the limit of %d bytes", len(target), MaxURLLength)
	} else {
		e = validateURL(req.URL)
	}
	if e != nil {
		e.target = target
		return e
	}
	return nil
}

// dial is the Transport's DialContext. It resolves the host itself, refuses
// the connection if any address is blocked, and dials the checked addresses
// as IP literals so that nothing is resolved again.
func (f *Fetcher) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, newError(ReasonBadURL, err, "the address %q is not valid", address)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, newError(ReasonBadURL, err, "the port %q is not valid", portStr)
	}
	addrs, e := f.lookup(ctx, host)
	if e != nil {
		return nil, e
	}
	if e := f.checkAddrs(host, addrs); e != nil {
		return nil, e
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := f.dialer.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// control is the Dialer's Control hook, the second guard: it checks the
// address of the socket about to connect, whatever path led there.
func (f *Fetcher) control(network, address string, _ syscall.RawConn) error {
	if f.allowPrivate {
		return nil
	}
	// The address may be one a host name resolved to, which the message must not
	// show: the destination is not named.
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		f.log.Warn("safefetch: refused a destination", "address", address, "detail", "the address cannot be checked", "error", err)
		return refused(ReasonBlocked, err, "")
	}
	if reason, blocked := f.blocked(ap.Addr()); blocked {
		f.log.Warn("safefetch: refused a destination", "address", ap.Addr().String(), "detail", "the address is "+reason)
		return refused(ReasonBlocked, nil, "")
	}
	return nil
}

// lookup returns the addresses of host: the address itself for an IP
// literal, the resolver's answer otherwise. A host that cannot be resolved is
// refused with the message of every refused destination (see [refused]).
func (f *Fetcher) lookup(ctx context.Context, host string) ([]netip.Addr, *Error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	addrs, err := f.resolve(ctx, host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			f.log.InfoContext(ctx, "safefetch: refused a destination", "host", host, "detail", "the host does not exist")
		} else if ctx.Err() == nil {
			f.log.WarnContext(ctx, "safefetch: refused a destination", "host", host, "detail", "the host could not be resolved", "error", err)
		}
		return nil, refused(ReasonNetwork, err, host)
	}
	if len(addrs) == 0 {
		f.log.InfoContext(ctx, "safefetch: refused a destination", "host", host, "detail", "the host has no addresses")
		return nil, refused(ReasonNetwork, nil, host)
	}
	return addrs, nil
}

// checkAddrs applies the address policy to the addresses of host. It refuses
// the host if any one of them is blocked. An IP literal is told why, which
// says nothing the address does not; a host name gets the message of every
// refused destination, and the address and why it is blocked go to the log.
func (f *Fetcher) checkAddrs(host string, addrs []netip.Addr) *Error {
	if f.allowPrivate {
		return nil
	}
	for _, a := range addrs {
		reason, blocked := f.blocked(a)
		if !blocked {
			continue
		}
		f.log.Warn("safefetch: refused a destination", "host", host, "address", a.String(), "detail", "the address is "+reason)
		if lit, err := netip.ParseAddr(host); err == nil {
			return newError(ReasonBlocked, nil, "%s is %s; only public internet addresses can be fetched", lit, reason)
		}
		return refused(ReasonBlocked, nil, host)
	}
	return nil
}

// refused returns the error of a host name the Fetcher will not fetch from: one
// that does not exist, cannot be resolved, has no addresses, or resolves to a
// blocked address. The message is the same for all of them, so that an
// outsider cannot tell from the answers which internal names exist; the detail
// goes to the log. An empty host stands for a destination that is not named.
func refused(reason Reason, cause error, host string) *Error {
	what := "the destination"
	if host != "" {
		what = "the host " + strconv.Quote(host)
	}
	return newError(reason, cause, "%s cannot be fetched from: files are fetched only from hosts with public internet addresses; check the url", what)
}

// requestError turns an error from the HTTP client or the body into an
// *Error. parent is the caller's context, tctx the one carrying the timeout.
func (f *Fetcher) requestError(parent, tctx context.Context, err error) *Error {
	var target string
	if ue, ok := err.(*url.Error); ok {
		target = ue.URL
	}
	// A refusal of ours (blocked address, bad redirect) is the answer even if
	// time ran out meanwhile; a network failure is more likely the result of
	// the timeout or cancellation than its cause.
	var own *Error
	errors.As(err, &own)
	var e *Error
	switch ce := f.contextError(parent, tctx); {
	case own != nil && own.Reason != ReasonNetwork:
		c := *own
		e = &c
	case ce != nil:
		e = ce
	case own != nil:
		c := *own
		e = &c
	default:
		e = newError(ReasonNetwork, err, "%s", networkDetail(err))
	}
	if e.target == "" {
		e.target = target
	}
	return e
}

// contextError reports why tctx, derived from parent with the fetch timeout,
// is done, or returns nil if it is not.
func (f *Fetcher) contextError(parent, tctx context.Context) *Error {
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return newError(ReasonCanceled, parent.Err(), "the fetch was canceled")
	case parent.Err() != nil:
		return newError(ReasonTimeout, parent.Err(), "the fetch ran out of time; try again or use a faster server")
	case tctx.Err() != nil:
		return newError(ReasonTimeout, tctx.Err(), "the fetch did not finish within %s; use a faster server or a smaller file", f.timeout)
	}
	return nil
}

// networkDetail describes a transport failure without repeating text that
// came from the server.
func networkDetail(err error) string {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return "the server's tls certificate is not valid; use a url whose server has a valid certificate"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return "could not connect to the server: " + errno.Error()
		}
		return "could not connect to the server"
	}
	return "the connection to the server failed"
}

// parseURL parses and validates a URL given by the caller.
func parseURL(rawURL string) (*url.URL, *Error) {
	if len(rawURL) > MaxURLLength {
		return nil, newError(ReasonBadURL, nil, "the url is %d bytes long, over the limit of %d bytes", len(rawURL), MaxURLLength)
	}
	if rawURL == "" {
		return nil, newError(ReasonBadURL, nil, "the url is empty; use an absolute http or https url")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		detail := err.Error()
		if ue, ok := err.(*url.Error); ok {
			detail = ue.Err.Error()
		}
		return nil, newError(ReasonBadURL, err, "the url cannot be parsed: %s", detail)
	}
	if e := validateURL(u); e != nil {
		return nil, e
	}
	return u, nil
}

// validateURL checks the parts of a parsed URL that do not need the network.
func validateURL(u *url.URL) *Error {
	switch {
	case u.Scheme == "":
		return newError(ReasonScheme, nil, "the url has no scheme; use an absolute http or https url")
	case u.Scheme != "http" && u.Scheme != "https":
		return newError(ReasonScheme, nil, "the scheme %q is not supported; use http or https", u.Scheme)
	case u.User != nil:
		return newError(ReasonBadURL, nil, "the url contains a user name or password; remove the credentials, only public files can be fetched")
	case u.Hostname() == "":
		return newError(ReasonBadURL, nil, "the url has no host; use an absolute http or https url")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return newError(ReasonBadURL, nil, "the port %q is not valid", p)
		}
	}
	return nil
}

// maxNameLen bounds File.Name, in bytes.
const maxNameLen = 128

// fileName returns the sanitized last path segment of u (see File.Name).
func fileName(u *url.URL) string {
	p := u.EscapedPath()
	seg, err := url.PathUnescape(p[strings.LastIndexByte(p, '/')+1:])
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range seg {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && c != '.' && c != '-' && c != '_' {
			c = '_'
		}
		if b.Len()+utf8.RuneLen(c) > maxNameLen {
			break
		}
		b.WriteRune(c)
	}
	name := strings.Trim(b.String(), ".")
	if strings.Trim(name, "_") == "" {
		return ""
	}
	return name
}
