// Package doors mounts the front doors of a Service on one mux in one call, wired as
// they belong together: one HTTP edge (trusted proxies, CORS, rate headers) for all of
// them, the account holders' API and GraphQL behind the session cookie, the OpenAPI
// document with every route it describes, the dashboard on the sessions and the
// gateway's estimates, and MCP behind the OAuth authorization server when the host
// asks for it. Hosts that want a door elsewhere, or other wiring, mount the doors'
// packages one by one instead.
//
// The routes, on the mux the host gives:
//
//	/v1/                     REST: /v1/{api_id}, /v1/{api_id}/batch, /v1/catalog, /v1/analytics, /v1/openapi.json (package rest)
//	/v1/graphql              the GraphQL gateway (package gql)
//	/v1/mcp                  MCP (package mcp)
//	/v1/account, /v1/account/  the account holders' API (package selfservice)
//	/v1/account/session      sessions (package session), when the service has session tokens
//	/dashboard/              the dashboard (package dashboard), with sessions
//	/admin/                  the admin API (package admin), with an admin token; its OpenAPI document, /admin/v1/openapi.json, needs none
//	/, /.well-known/...      the OAuth authorization server (package oauth), with [Options.OAuth]
//
// With an access log (Options.Edge.AccessLog), every route logs one line per request
// (see edge.Edge.Handler), naming its door: rest, batch, graphql, mcp, account,
// session, dashboard, admin or oauth; Mount subscribes the edge's observer to the
// service's calls, until [Mounted.Close], so that the lines of calls carry the
// account, key id, APIs and credits.
package doors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/dashboard"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/oauth"
	"github.com/tollgate-dev/tollgate/rest"
	"github.com/tollgate-dev/tollgate/selfservice"
	"github.com/tollgate-dev/tollgate/session"
	"github.com/tollgate-dev/tollgate/webhook"
)

// A Door is one of the doors Mount can mount; a set of them is their sum.
type Door uint16

// The doors.
const (
	REST      Door = 1 << iota // calls, batches, the catalog, analytics, OpenAPI
	GraphQL                    // the read-only GraphQL gateway
	MCP                        // every API as an MCP tool
	Account                    // the account holders' API
	Sessions                   // sessions for programs and browsers
	Dashboard                  // the account holders' web pages
	Admin                      // the operators' API

	// All are the doors. When [Options.Doors] is zero, Mount mounts those of them the
	// service can serve: sessions and the dashboard need the service's session tokens
	// (tollgate.Options.Sessions and SessionStore), and the admin API an admin token.
	All = REST | GraphQL | MCP | Account | Sessions | Dashboard | Admin
)

// Options configures Mount. The zero value mounts every door the service can serve,
// on the default edge.
type Options struct {
	// Doors are the doors to mount. Zero mounts every door the service can serve
	// (see [All]); a door named here that cannot be served is an error.
	Doors Door
	// Edge is the HTTP edge every door shares: the trusted proxies, the origins CORS
	// allows, the IETF rate headers.
	Edge edge.Options
	// Accounts is the manager of the service's accounts, for the doors that manage
	// them. Nil: Mount makes one with accounts.New(svc, nil), which keeps no audit log
	// and no usage; give yours to have them.
	Accounts *accounts.Manager
	// Webhooks manages the webhook endpoints (webhook.NewEndpoints, on the service's
	// events), for the account holders' API (/v1/account/webhooks), the dashboard's
	// Webhooks page (unless Dashboard.Webhooks is set) and the admin API
	// (/admin/v1/webhooks). Nil: the service delivers no webhooks, those routes answer
	// 404, and the dashboard has no Webhooks page.
	Webhooks *webhook.Endpoints
	// AdminToken protects the admin API, sent as Authorization: Bearer; at least
	// admin.MinTokenLength characters. Without it the admin API is not mounted.
	AdminToken string
	// OAuth, if set, mounts an OAuth authorization server for MCP clients: a client
	// that connects to /v1/mcp without a key is sent through it, and its tokens act
	// as the key the person approved.
	OAuth *OAuth
	// PublicURL is the service's public origin, such as https://api.example.com: the
	// OAuth issuer, and what the dashboard shows in its snippets. The default is
	// the origin each request came to.
	PublicURL string
	// Logger receives the doors' failures. The default is slog.Default().
	Logger *slog.Logger
	// Brand is the operator's brand, what the service's customers see it called: the
	// dashboard's title and snippets, the OpenAPI document's title, the MCP server's
	// name and the OAuth consent page take it (see package brand). Mount gives it to
	// each door whose own options set no Brand. The zero value is brand.Default();
	// an invalid brand is an error.
	Brand brand.Brand

	// Each door's own settings. Mount sets their Edge, Logger, Brand, and where they
	// are wired to another door or to the options above (REST's Accounts and OpenAPI
	// paths, the dashboard's GraphQL and Webhooks, MCP's tokens), on a copy.
	REST      rest.Options
	GraphQL   gql.Options
	MCP       mcp.Options
	Sessions  session.Options
	Dashboard dashboard.Options
}

// OAuth configures the authorization server that [Mount] puts in front of MCP.
type OAuth struct {
	// Store keeps the server's clients and grants (memory.NewOAuthStore on one
	// instance).
	Store oauth.Store
	// Options are the server's; Mount sets Issuer (from [Options.PublicURL]),
	// Resources, Edge and Logger, and Brand unless it is set.
	Options oauth.Options
}

// Mounted is what [Mount] mounted.
type Mounted struct {
	// Doors are the doors mounted.
	Doors Door
	// Accounts is the manager the doors share: Options.Accounts, or the one Mount
	// made.
	Accounts *accounts.Manager
	// Edge is the edge the doors share.
	Edge *edge.Edge

	REST      *rest.Handler
	GraphQL   *gql.Handler
	MCP       *mcp.Handler
	Account   *selfservice.Handler
	Sessions  *session.Handler
	Dashboard *dashboard.Handler
	Admin     *admin.Handler
	OAuth     *oauth.Server

	ownManager bool
	unobserve  func() // ends the access log's observation of the calls; nil without one
}

// Mount mounts the doors of svc on mux (see the package documentation for the
// routes). opts may be nil. A door that cannot be built, or a route the mux already
// has, fails Mount with the mux left as it was (a pattern of the host's that conflicts
// with a route in another way panics, as http.ServeMux.Handle does). Call
// [Mounted.Close] when the server stops, before http.Server.Shutdown: MCP's event
// streams stay open until it ends them.
func Mount(mux *http.ServeMux, svc *tollgate.Service, opts *Options) (_ *Mounted, err error) {
	if mux == nil || svc == nil {
		return nil, errors.New("doors: Mount needs a mux and a Service")
	}
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := opts.Brand.Check(); err != nil {
		return nil, errors.New("doors: Options.Brand: " + strings.TrimPrefix(err.Error(), "brand: "))
	}
	want, err := doorsFor(svc, opts)
	if err != nil {
		return nil, err
	}
	m := &Mounted{Doors: want, Accounts: opts.Accounts}
	// The routes are registered once every door is built, so that a door that cannot
	// be leaves the mux as it was.
	routes := map[string]http.Handler{}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if m.Edge, err = edge.New(&opts.Edge); err != nil {
		return nil, err
	}
	// route registers a door's route, with the access log around it.
	route := func(pattern, door string, h http.Handler) { routes[pattern] = m.Edge.Handler(door, h) }
	if m.Accounts == nil {
		if m.Accounts, err = accounts.New(svc, &accounts.Options{Logger: log}); err != nil {
			return nil, err
		}
		m.ownManager = true
	} else if m.Accounts.Service() != svc {
		return nil, errors.New("doors: Options.Accounts manages the accounts of another service; give the manager of this one")
	}
	if want&Sessions != 0 {
		so := opts.Sessions
		so.Edge, so.Logger = m.Edge, orLogger(so.Logger, log)
		if m.Sessions, err = session.NewHandler(m.Accounts, &so); err != nil {
			return nil, err
		}
		route("/v1/account/session", "session", m.Sessions)
	}
	// withCookies serves a door to browsers on their session cookie too, when there
	// are sessions.
	withCookies := func(h http.Handler) http.Handler {
		if m.Sessions == nil {
			return h
		}
		return m.Sessions.Cookies(h)
	}
	if want&REST != 0 {
		ro := opts.REST
		ro.Edge, ro.Accounts, ro.Logger, ro.Brand = m.Edge, m.Accounts, orLogger(ro.Logger, log), orBrand(ro.Brand, opts.Brand)
		ro.OpenAPI.Paths = maps.Clone(ro.OpenAPI.Paths)
		if ro.OpenAPI.Paths == nil {
			ro.OpenAPI.Paths = map[string]any{}
		}
		if want&Account != 0 {
			maps.Copy(ro.OpenAPI.Paths, selfservice.OpenAPIPaths())
		}
		if want&Sessions != 0 {
			maps.Copy(ro.OpenAPI.Paths, session.OpenAPIPaths())
		}
		if m.REST, err = rest.NewHandler(svc, &ro); err != nil {
			return nil, err
		}
		route("/v1/", "rest", m.REST)
	}
	if want&Account != 0 {
		if m.Account, err = selfservice.NewHandler(m.Accounts, &selfservice.Options{Edge: m.Edge, Webhooks: opts.Webhooks}); err != nil {
			return nil, err
		}
		route("/v1/account", "account", withCookies(m.Account))
		route("/v1/account/", "account", withCookies(m.Account))
	}
	if want&GraphQL != 0 {
		gopts := opts.GraphQL
		gopts.Edge, gopts.Logger = m.Edge, orLogger(gopts.Logger, log)
		if m.GraphQL, err = gql.NewHandler(svc, &gopts); err != nil {
			return nil, err
		}
		route("/v1/graphql", "graphql", withCookies(m.GraphQL))
	}
	if want&Dashboard != 0 {
		dopts := opts.Dashboard
		dopts.Logger, dopts.Brand = orLogger(dopts.Logger, log), orBrand(dopts.Brand, opts.Brand)
		if dopts.PublicURL == "" {
			dopts.PublicURL = opts.PublicURL
		}
		if m.GraphQL != nil && dopts.GraphQL == nil {
			dopts.GraphQL = QueryCosts(m.GraphQL)
		}
		if dopts.Webhooks == nil {
			dopts.Webhooks = opts.Webhooks
		}
		if m.Dashboard, err = dashboard.NewHandler(m.Accounts, m.Sessions, &dopts); err != nil {
			return nil, err
		}
		route("/dashboard/", "dashboard", http.StripPrefix("/dashboard", m.Dashboard))
	}
	if want&Admin != 0 {
		if m.Admin, err = admin.NewHandler(m.Accounts, opts.AdminToken, &admin.Options{Edge: m.Edge, Webhooks: opts.Webhooks}); err != nil {
			return nil, err
		}
		route("/admin/", "admin", m.Admin)
	}
	if want&MCP != 0 {
		mo := opts.MCP
		mo.Edge, mo.Logger, mo.Brand = m.Edge, orLogger(mo.Logger, log), orBrand(mo.Brand, opts.Brand)
		if opts.OAuth != nil {
			if err := m.mountOAuth(routes, svc, opts, &mo, log); err != nil {
				return nil, err
			}
		}
		if m.MCP, err = mcp.NewHandler(svc, &mo); err != nil {
			return nil, err
		}
		route("/v1/mcp", "mcp", m.MCP)
	}
	patterns := slices.Sorted(maps.Keys(routes))
	for _, pattern := range patterns {
		if _, taken := mux.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: pattern}}); taken == pattern {
			return nil, fmt.Errorf("doors: the mux already has a handler for %s", pattern)
		}
	}
	for _, pattern := range patterns {
		mux.Handle(pattern, routes[pattern])
	}
	if m.Edge.AccessLogged() {
		m.unobserve = svc.Events().Subscribe(m.Edge.Observer(), event.CallFinished, event.CallRefused)
	}
	return m, nil
}

// mountOAuth mounts the authorization server, and has MCP take its tokens.
func (m *Mounted) mountOAuth(routes map[string]http.Handler, svc *tollgate.Service, opts *Options, mo *mcp.Options, log *slog.Logger) error {
	if opts.PublicURL == "" {
		return errors.New("doors: Options.OAuth needs Options.PublicURL, the issuer of the tokens")
	}
	if opts.OAuth.Store == nil {
		return errors.New("doors: Options.OAuth needs a Store")
	}
	issuer := strings.TrimSuffix(opts.PublicURL, "/")
	resource := issuer + "/v1/mcp"
	oo := opts.OAuth.Options
	oo.Issuer, oo.Resources, oo.Edge, oo.Logger, oo.Brand = issuer, []string{resource}, m.Edge, orLogger(oo.Logger, log), orBrand(oo.Brand, opts.Brand)
	var err error
	if m.OAuth, err = oauth.New(opts.OAuth.Store, oauth.ServiceKeys(svc), &oo); err != nil {
		return err
	}
	routes["/"] = m.Edge.Handler("oauth", m.OAuth.Handler())
	routes[oauth.ResourceMetadataPath(resource)] = m.Edge.Handler("oauth", m.OAuth.ProtectedResourceMetadata(resource))
	server := m.OAuth
	mo.Challenge = server.Challenge(resource)
	mo.VerifyToken = func(ctx context.Context, token string) (string, error) {
		grant, err := server.VerifyAccessToken(ctx, token, resource)
		if err != nil && !errors.Is(err, oauth.ErrInvalidToken) {
			// The grants cannot be read: not a verdict on the token.
			return "", &tollgate.Error{Code: tollgate.CodeUnavailable, Err: err,
				Message: "the authorization server cannot check the token now; try again shortly"}
		}
		return grant.KeyID, err
	}
	return nil
}

// doorsFor returns the doors to mount: those asked for, or the default ones the
// service can serve.
func doorsFor(svc *tollgate.Service, opts *Options) (Door, error) {
	if opts.OAuth != nil && (opts.MCP.VerifyToken != nil || opts.MCP.Challenge != "") {
		return 0, errors.New("doors: Options.OAuth verifies MCP's tokens itself: leave Options.MCP.VerifyToken and Challenge unset")
	}
	signer, sessions := svc.Sessions()
	canSessions := signer != nil && sessions != nil
	if opts.Doors == 0 {
		want := All
		if !canSessions {
			want &^= Sessions | Dashboard
		}
		if opts.AdminToken == "" {
			want &^= Admin
		}
		return want, nil
	}
	want := opts.Doors
	switch {
	case want&^All != 0:
		return 0, fmt.Errorf("doors: Options.Doors names an unknown door (%#x)", uint16(want&^All))
	case want&(Sessions|Dashboard) != 0 && !canSessions:
		return 0, errors.New("doors: sessions and the dashboard need the service's session tokens: set tollgate.Options.Sessions and SessionStore")
	case want&Dashboard != 0 && want&Sessions == 0:
		return 0, errors.New("doors: the dashboard needs the Sessions door, whose cookie it signs in with")
	case want&Admin != 0 && opts.AdminToken == "":
		return 0, errors.New("doors: the admin API needs Options.AdminToken")
	case opts.OAuth != nil && want&MCP == 0:
		return 0, errors.New("doors: Options.OAuth is for MCP clients: mount the MCP door too")
	}
	return want, nil
}

// orBrand returns a door's own brand, or the one of Mount's options when it has none.
func orBrand(b, def brand.Brand) brand.Brand {
	if b != (brand.Brand{}) {
		return b
	}
	return def
}

func orLogger(l, def *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return def
}

// Close ends what the doors hold open (MCP's sessions and event streams) and closes
// the manager Mount made. It does not close the service, nor a manager the host gave.
func (m *Mounted) Close() {
	if m.unobserve != nil {
		m.unobserve()
	}
	if m.MCP != nil {
		m.MCP.Close()
	}
	if m.ownManager && m.Accounts != nil {
		m.Accounts.Close()
	}
}
