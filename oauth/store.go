package oauth

import "github.com/tollgate-dev/tollgate/oauth/oauthstore"

// Store keeps the server's clients, approvals, codes and tokens; see
// [oauthstore.Store] for its contract, and store/memory and store/postgres for
// implementations. Its records are defined in package oauthstore, so that stores need
// not depend on package oauth.
type Store = oauthstore.Store
