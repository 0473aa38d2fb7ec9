package brand_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/brand"
)

func TestDefault(t *testing.T) {
	d := brand.Default()
	if err := d.Check(); err != nil {
		t.Fatal(err)
	}
	if (brand.Brand{}).OrDefault() != d || d.OrDefault() != d {
		t.Error("OrDefault does not give the default for the zero Brand, or changes the default")
	}
	if got := (brand.Brand{}).KeyVar(); got != "TOLLGATE_API_KEY" {
		t.Errorf("KeyVar of the zero Brand = %q", got)
	}
	if got := (brand.Brand{}).BaseURLVar(); got != "TOLLGATE_BASE_URL" {
		t.Errorf("BaseURLVar of the zero Brand = %q", got)
	}
	acme := brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME_CLOUD"}
	if acme.KeyVar() != "ACME_CLOUD_API_KEY" || acme.BaseURLVar() != "ACME_CLOUD_BASE_URL" {
		t.Errorf("the variables of %+v: %s, %s", acme, acme.KeyVar(), acme.BaseURLVar())
	}
}

func TestCheck(t *testing.T) {
	ok := brand.Brand{Name: "Acme API", Command: "acme", EnvPrefix: "ACME"}
	tests := []struct {
		name string
		b    brand.Brand
		want string // in the error; "" for none
	}{
		{"zero", brand.Brand{}, ""},
		{"acme", ok, ""},
		{"punctuation and letters of any script in the name", brand.Brand{Name: `Ac<me> "&" Ωmega's API`, Command: "acme-2-api", EnvPrefix: "ACME_2_API"}, ""},
		{"longest", brand.Brand{Name: strings.Repeat("é", brand.MaxNameLength), Command: "a" + strings.Repeat("b", brand.MaxCommandLength-1),
			EnvPrefix: "A" + strings.Repeat("B", brand.MaxEnvPrefixLength-1)}, ""},
		{"no name", brand.Brand{Command: "acme", EnvPrefix: "ACME"}, "Name is empty"},
		{"name too long", brand.Brand{Name: strings.Repeat("a", brand.MaxNameLength+1), Command: "acme", EnvPrefix: "ACME"}, "at most 64"},
		{"newline in name", brand.Brand{Name: "Acme\nrm -rf", Command: "acme", EnvPrefix: "ACME"}, "not printable"},
		{"bidi override in name", brand.Brand{Name: "Acme\u202e", Command: "acme", EnvPrefix: "ACME"}, "not printable"},
		{"tab in name", brand.Brand{Name: "Ac\tme", Command: "acme", EnvPrefix: "ACME"}, "not printable"},
		{"leading space", brand.Brand{Name: " Acme", Command: "acme", EnvPrefix: "ACME"}, "space"},
		{"double space", brand.Brand{Name: "Ac  me", Command: "acme", EnvPrefix: "ACME"}, "space"},
		{"invalid UTF-8", brand.Brand{Name: "Ac\xffme", Command: "acme", EnvPrefix: "ACME"}, "UTF-8"},
		{"no command", brand.Brand{Name: "Acme", EnvPrefix: "ACME"}, "Command"},
		{"uppercase command", brand.Brand{Name: "Acme", Command: "Acme", EnvPrefix: "ACME"}, "lowercase letters"},
		{"command with a space", brand.Brand{Name: "Acme", Command: "acme cli", EnvPrefix: "ACME"}, "Command"},
		{"command with a quote", brand.Brand{Name: "Acme", Command: "acme'", EnvPrefix: "ACME"}, "Command"},
		{"command with a slash", brand.Brand{Name: "Acme", Command: "../acme", EnvPrefix: "ACME"}, "Command"},
		{"command starting with a digit", brand.Brand{Name: "Acme", Command: "1acme", EnvPrefix: "ACME"}, "Command"},
		{"command starting with a hyphen", brand.Brand{Name: "Acme", Command: "-acme", EnvPrefix: "ACME"}, "Command"},
		{"command ending with a hyphen", brand.Brand{Name: "Acme", Command: "acme-", EnvPrefix: "ACME"}, "Command"},
		{"command with two hyphens", brand.Brand{Name: "Acme", Command: "acme--api", EnvPrefix: "ACME"}, "Command"},
		{"command with an underscore", brand.Brand{Name: "Acme", Command: "acme_api", EnvPrefix: "ACME"}, "Command"},
		{"command too long", brand.Brand{Name: "Acme", Command: strings.Repeat("a", brand.MaxCommandLength+1), EnvPrefix: "ACME"}, "1 to 32"},
		{"non-ASCII command", brand.Brand{Name: "Acme", Command: "acmé", EnvPrefix: "ACME"}, "Command"},
		{"no prefix", brand.Brand{Name: "Acme", Command: "acme"}, "EnvPrefix"},
		{"lowercase prefix", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "acme"}, "uppercase letters"},
		{"prefix with a hyphen", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME-API"}, "EnvPrefix"},
		{"prefix with a dollar", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME$X"}, "EnvPrefix"},
		{"prefix ending with _", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "ACME_"}, "EnvPrefix"},
		{"prefix starting with a digit", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "9ACME"}, "EnvPrefix"},
		{"prefix too long", brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: strings.Repeat("A", brand.MaxEnvPrefixLength+1)}, "EnvPrefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.b.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
