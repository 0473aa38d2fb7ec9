package edge

import (
	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
)

// A Visit is a browser's request authenticated by its session cookie (the session
// door reads it): the live session's claims, the caller that calls the service on the
// session's behalf, and the session's CSRF token, which every change the page sends
// must carry in wire.HeaderCSRFToken.
type Visit struct {
	Claims    auth.SessionClaims
	Caller    tollgate.Caller
	CSRFToken string
}
