package catalog_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/tollgate-dev/tollgate/catalog"
)

func ExampleRegistry_Register() {
	reg := &catalog.Registry{}
	err := reg.Register(catalog.API{
		ID: "hash", Title: "Hash", Category: "Security",
		Description: "Computes the SHA-256 hash of a text.",
		Method:      http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "text", Type: catalog.String, Required: true, MaxLength: catalog.Len(10000)},
			{Name: "algorithm", Type: catalog.String, Enum: []any{"sha256"}, Default: "sha256"},
			{Name: "repeat", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(10), Default: 1},
		},
		Result: []catalog.Field{{Name: "hash", Type: catalog.String}},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			sum := sha256.Sum256([]byte(req.Params.String("text")))
			return map[string]any{"hash": hex.EncodeToString(sum[:])}, nil
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	api, _ := reg.Lookup("hash")
	params, err := api.ValidateQuery(url.Values{"text": {"hello"}, "repeat": {"3"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(params)
	fmt.Printf("repeat is %T\n", params["repeat"])
	fmt.Println("GraphQL root field:", catalog.RootFieldName(api.ID))
	// Output:
	// map[algorithm:sha256 repeat:3 text:hello]
	// repeat is int64
	// GraphQL root field: hash
}

func ExampleGraphQLName() {
	for _, name := range []string{"day-of-week", "iso:week", "unix.seconds", "quarter/year", "1st-of-month", "is leap year", "delay_ms"} {
		fmt.Printf("%-14s -> %s\n", name, catalog.GraphQLName(name))
	}
	fmt.Println(catalog.RootFieldName("uuid-generator"))
	// Output:
	// day-of-week    -> day_of_week
	// iso:week       -> iso_week
	// unix.seconds   -> unix_seconds
	// quarter/year   -> quarter_year
	// 1st-of-month   -> _1st_of_month
	// is leap year   -> isleapyear
	// delay_ms       -> delay_ms
	// uuidgenerator
}

func ExampleAPI_ValidateJSON() {
	api, err := catalog.Compile(catalog.API{
		ID: "uuid-generator", Method: http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "count", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(100), Default: 1},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	params, err := api.ValidateJSON(map[string]any{})
	fmt.Println(params, err)

	_, err = api.ValidateJSON(map[string]any{"count": 500})
	var pe *catalog.ParamError
	if errors.As(err, &pe) {
		fmt.Println(pe.Param)
		fmt.Println(err)
	}

	_, err = api.ValidateJSON(map[string]any{"cuont": 5})
	fmt.Println(err)
	// Output:
	// map[count:1] <nil>
	// count
	// parameter "count": must be at most 100, got 500
	// parameter "cuont": unknown parameter; this API accepts count
}
