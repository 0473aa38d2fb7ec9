package postgres

import "github.com/jackc/pgx/v5/pgtype"

// uuidArg is a 16-byte id (a request id, a slot's holder, an idempotency run or token)
// as a statement argument of type uuid. pgx encodes a pgtype.UUID (and a slice of
// them) in every exec mode; a bare [16]byte only where the server has told it the
// parameter's type (cache_statement, cache_describe), not in the exec and
// simple_protocol modes a connection pooler may need, which have no type to encode it
// as.
func uuidArg(b [16]byte) pgtype.UUID { return pgtype.UUID{Bytes: b, Valid: true} }
