package auth_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

func ExampleCredentialFrom() {
	h := http.Header{}
	// Several forms may be sent; x-api-key comes first. Keys are returned in lowercase.
	h.Set("Authorization", "Bearer 0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d")
	h.Set("X-API-KEY", "3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6F")
	cred, err := auth.CredentialFrom(h)
	fmt.Println(cred.Kind == auth.APIKeyHeader, cred.Value, err)

	// A placeholder never reaches a lookup: it fails the edge check.
	h = http.Header{}
	h.Set("x-api-key", "YOUR_API_KEY")
	_, err = auth.CredentialFrom(h)
	fmt.Println(errors.Is(err, auth.ErrMalformedCredential))

	_, err = auth.CredentialFrom(http.Header{})
	fmt.Println(errors.Is(err, auth.ErrNoCredential))
	// Output:
	// true 3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f <nil>
	// true
	// true
}

func ExampleRestrictions_Within() {
	account, _ := auth.NewRestrictions(auth.RestrictionSpec{
		APIs:       []string{"weather", "geo-ip"},
		AllowedIPs: []string{"10.0.0.0/8"},
	})
	narrower, _ := auth.NewRestrictions(auth.RestrictionSpec{
		APIs:       []string{"weather"},
		AllowedIPs: []string{"10.1.0.0/16"},
	})
	wider, _ := auth.NewRestrictions(auth.RestrictionSpec{
		APIs:       []string{"weather", "stocks"},
		AllowedIPs: []string{"10.1.0.0/16"},
	})

	fmt.Println(narrower.Within(account))
	err := wider.Within(account)
	fmt.Println(errors.Is(err, auth.ErrWidens))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// a sub-key cannot widen its account: apis: API "stocks" is not allowed for the account, which may call only geo-ip, weather
}

func ExampleSessions() {
	// In production the secret is at least 32 random bytes kept by the host.
	sessions, err := auth.NewSessions([]byte("an example secret, 32 bytes long"))
	if err != nil {
		fmt.Println(err)
		return
	}
	issued := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	token, _ := sessions.Issue("acct_42", issued, 8*time.Hour)

	account, err := sessions.Verify(token, issued.Add(time.Hour))
	fmt.Println(account, err)

	_, err = sessions.Verify(token, issued.Add(8*time.Hour))
	fmt.Println(err)
	fmt.Println(errors.Is(err, auth.ErrInvalidSession))
	// Output:
	// acct_42 <nil>
	// the session token is not valid: it has expired; sign in again
	// true
}
