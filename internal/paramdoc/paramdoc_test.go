package paramdoc_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

func TestRules(t *testing.T) {
	tests := []struct {
		p         catalog.Param
		typ, want string
	}{
		{catalog.Param{Type: catalog.String}, "string", ""},
		{catalog.Param{Type: catalog.String, Required: true, MaxLength: catalog.Len(10000)}, "string", "required; at most 10000 characters"},
		{catalog.Param{Type: catalog.String, MinLength: catalog.Len(1), MaxLength: catalog.Len(5)}, "string", "1 to 5 characters"},
		{catalog.Param{Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(100), Default: int64(1)}, "integer", "1 to 100; default 1"},
		{catalog.Param{Type: catalog.Number, Min: catalog.Num(0.5)}, "number", "at least 0.5"},
		{catalog.Param{Type: catalog.String, Enum: []any{"hex", "base64"}, Default: "hex"}, "string", "one of hex, base64; default hex"},
		{catalog.Param{Type: catalog.String, Format: catalog.FormatDate}, "string", "format date (YYYY-MM-DD)"},
		{catalog.Param{Type: catalog.Array, Items: &catalog.Param{Type: catalog.Integer}, MinLength: catalog.Len(2), Default: []any{int64(1), int64(2)}}, "array of integer", "at least 2 elements; default [1,2]"},
	}
	for _, tt := range tests {
		if got := paramdoc.Rules(&tt.p); got != tt.want {
			t.Errorf("Rules(%+v) = %q, want %q", tt.p, got, tt.want)
		}
		if got := paramdoc.Type(&tt.p); got != tt.typ {
			t.Errorf("Type(%+v) = %q, want %q", tt.p, got, tt.typ)
		}
	}
	for n, want := range map[int64]string{5 << 20: "5 MiB", 512 << 10: "512 KiB", 100: "100 bytes", 1500: "1500 bytes"} {
		if got := paramdoc.Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
