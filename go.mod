module github.com/tollgate-dev/tollgate

go 1.25.0

require (
	github.com/google/uuid v1.6.0
	golang.org/x/time v0.15.0
)
