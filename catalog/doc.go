// Package catalog describes the APIs a Tollgate service publishes: their identifiers,
// typed parameters, credit costs, result fields and handlers, and the registry that holds
// them.
//
// A definition is one source of truth. From it the package derives input validation for
// every protocol ([API.ValidateQuery] for query strings and form fields,
// [API.ValidateJSON] for JSON bodies and protocol arguments), the JSON Schema of the
// input and result ([API.InputSchema], [API.ResultSchema]), which feed the OpenAPI
// document, MCP tool schemas and the generated clients, and the GraphQL names
// ([RootFieldName], [GraphQLName]). Because everything comes from the same definition,
// the server, the documents and the clients cannot drift apart.
//
// # Defining an API
//
//	reg := &catalog.Registry{}
//	err := reg.Register(catalog.API{
//		ID: "hash", Title: "Hash", Category: "Security",
//		Description: "Computes a cryptographic hash of a text.",
//		Method: "GET", Cost: 1,
//		Params: []catalog.Param{
//			{Name: "text", Type: catalog.String, Required: true, MaxLength: catalog.Len(10000)},
//			{Name: "algorithm", Type: catalog.String, Enum: []any{"md5", "sha256"}, Default: "sha256"},
//		},
//		Result: []catalog.Field{{Name: "hash", Type: catalog.String}},
//		Handler: catalog.HandlerFunc(hashText),
//	})
//
// Registration checks the definition completely ([Compile]): a default or example that
// breaks its own rules, a parameter or result field whose GraphQL name collides with
// another, or an id that shadows a service endpoint is a registration error, never a
// surprise at call time.
//
// # Validation
//
// Validation converts input to the declared types (query strings are text; JSON
// numbers become int64 or float64), applies defaults, refuses unknown parameters and
// names the offending parameter in a [*ParamError]. It never runs the handler, so a
// validation failure costs the caller nothing. Formats check shape only: whether a
// well-formed value makes sense (a date such as 2026-02-30) is the handler's judgement,
// reported with [Reject] and charged.
//
// # GraphQL names
//
// The GraphQL names of APIs, parameters and result fields follow four rules: a root field
// is its API id lowercased with hyphens removed; in other names each of - + : . / \
// becomes an underscore; any other character that is not an ASCII letter, digit or
// underscore is dropped; and a name that would start with a digit gets a leading
// underscore. [RootFieldName] (API ids) and [GraphQLName] (parameters and result fields)
// implement them. Underscores count as alphanumeric and
// are kept. Rule 4 (a leading digit gets an underscore) applies to root fields too, so
// every mapped name is a legal GraphQL name.
package catalog
