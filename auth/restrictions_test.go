package auth_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

func TestChannel(t *testing.T) {
	for _, tt := range []struct {
		ch   auth.Channel
		name string
	}{{auth.ChannelREST, "rest"}, {auth.ChannelGraphQL, "graphql"}, {auth.ChannelMCP, "mcp"}} {
		if got := tt.ch.String(); got != tt.name {
			t.Errorf("%d.String() = %q; want %q", tt.ch, got, tt.name)
		}
		if got, err := auth.ParseChannel(tt.name); err != nil || got != tt.ch {
			t.Errorf("ParseChannel(%q) = %v, %v; want %v", tt.name, got, err, tt.ch)
		}
	}
	if got := auth.Channel(0).String(); got != "channel(0)" {
		t.Errorf("Channel(0).String() = %q", got)
	}
	for _, bad := range []string{"", "REST", "http", "grpc", " rest"} {
		if _, err := auth.ParseChannel(bad); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("ParseChannel(%q) error = %v; want ErrInvalid", bad, err)
		}
	}
}

func TestNewRestrictionsInvalid(t *testing.T) {
	tests := []struct {
		name string
		spec auth.RestrictionSpec
		want string // in the message
	}{
		{"empty api id", auth.RestrictionSpec{APIs: []string{""}}, `api ""`},
		{"uppercase api id", auth.RestrictionSpec{APIs: []string{"Weather"}}, `"Weather"`},
		{"underscore api id", auth.RestrictionSpec{APIs: []string{"ok", "not_ok"}}, `"not_ok"`},
		{"api id with a space", auth.RestrictionSpec{APIs: []string{"a b"}}, `"a b"`},
		{"api id with a slash", auth.RestrictionSpec{APIs: []string{"v1/weather"}}, `"v1/weather"`},
		{"api id too long", auth.RestrictionSpec{APIs: []string{strings.Repeat("a", 65)}}, "api"},
		{"unknown channel", auth.RestrictionSpec{Channels: []string{"rest", "grpc"}}, `"grpc"`},
		{"uppercase channel", auth.RestrictionSpec{Channels: []string{"REST"}}, `"REST"`},
		{"empty channel", auth.RestrictionSpec{Channels: []string{""}}, "channel"},
		{"bad CIDR", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/33"}}, `"10.0.0.0/33"`},
		{"CIDR without bits", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/"}}, `"10.0.0.0/"`},
		{"bad address", auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.256"}}, `"10.0.0.256"`},
		{"hostname", auth.RestrictionSpec{AllowedIPs: []string{"example.com"}}, `"example.com"`},
		{"empty address", auth.RestrictionSpec{AllowedIPs: []string{""}}, "allowed_ips"},
		{"IPv6 prefix too long", auth.RestrictionSpec{AllowedIPs: []string{"2001:db8::/129"}}, `"2001:db8::/129"`},
		{"zero expires_at", auth.RestrictionSpec{ExpiresAt: &time.Time{}}, "expires_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := auth.NewRestrictions(tt.spec)
			if !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("NewRestrictions(%+v) error = %v; want ErrInvalid", tt.spec, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if !r.IsZero() {
				t.Errorf("NewRestrictions failed but returned non-zero restrictions %v", r.Spec())
			}
		})
	}
	// The longest API id is accepted.
	if _, err := auth.NewRestrictions(auth.RestrictionSpec{APIs: []string{strings.Repeat("a", 64)}}); err != nil {
		t.Errorf("64-character API id: %v", err)
	}
}

func TestNewRestrictionsNormalizes(t *testing.T) {
	plusTwo := time.Date(2030, 1, 1, 2, 0, 0, 0, time.FixedZone("UTC+2", 2*3600))
	tests := []struct {
		name string
		spec auth.RestrictionSpec
		want auth.RestrictionSpec
	}{
		{
			"APIs sorted and deduplicated",
			auth.RestrictionSpec{APIs: []string{"weather", "geo-ip", "weather", "dns-lookup", "geo-ip"}},
			auth.RestrictionSpec{APIs: []string{"dns-lookup", "geo-ip", "weather"}},
		},
		{
			"channels in canonical order, deduplicated",
			auth.RestrictionSpec{Channels: []string{"mcp", "rest", "mcp"}},
			auth.RestrictionSpec{Channels: []string{"rest", "mcp"}},
		},
		{
			"all channels",
			auth.RestrictionSpec{Channels: []string{"batch", "graphql", "mcp", "rest"}},
			auth.RestrictionSpec{Channels: []string{"rest", "graphql", "mcp", "batch"}},
		},
		{
			"prefixes masked, single addresses become host prefixes, deduplicated",
			auth.RestrictionSpec{AllowedIPs: []string{"10.1.2.3/8", "203.0.113.7", "10.0.0.0/8", "2001:db8::1", "2001:db8::ff/64", "203.0.113.7/32"}},
			auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8", "2001:db8::/64", "2001:db8::1/128", "203.0.113.7/32"}},
		},
		{
			"IPv4-mapped single address unmapped",
			auth.RestrictionSpec{AllowedIPs: []string{"::ffff:192.0.2.1"}},
			auth.RestrictionSpec{AllowedIPs: []string{"192.0.2.1/32"}},
		},
		{
			"IPv4-mapped prefixes unmapped",
			auth.RestrictionSpec{AllowedIPs: []string{"::ffff:192.0.2.77/120", "::ffff:198.51.100.7/128", "192.0.2.0/24"}},
			auth.RestrictionSpec{AllowedIPs: []string{"192.0.2.0/24", "198.51.100.7/32"}},
		},
		{
			"expiry in UTC",
			auth.RestrictionSpec{ExpiresAt: &plusTwo},
			auth.RestrictionSpec{ExpiresAt: at(t0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustRestrictions(t, tt.spec).Spec()
			if !reflect.DeepEqual(got.APIs, tt.want.APIs) || !reflect.DeepEqual(got.Channels, tt.want.Channels) ||
				!reflect.DeepEqual(got.AllowedIPs, tt.want.AllowedIPs) {
				t.Errorf("Spec() = %+v; want %+v", got, tt.want)
			}
			switch {
			case (got.ExpiresAt == nil) != (tt.want.ExpiresAt == nil):
				t.Errorf("ExpiresAt = %v; want %v", got.ExpiresAt, tt.want.ExpiresAt)
			case got.ExpiresAt != nil && (!got.ExpiresAt.Equal(*tt.want.ExpiresAt) || got.ExpiresAt.Location() != time.UTC):
				t.Errorf("ExpiresAt = %v; want %v in UTC", got.ExpiresAt, tt.want.ExpiresAt)
			}
		})
	}
}

func TestRestrictionsZero(t *testing.T) {
	for _, spec := range []auth.RestrictionSpec{
		{},
		{APIs: []string{}, Channels: []string{}, AllowedIPs: []string{}},
	} {
		r := mustRestrictions(t, spec)
		if !r.IsZero() {
			t.Errorf("NewRestrictions(%+v).IsZero() = false", spec)
		}
	}
	var zero auth.Restrictions
	if !zero.IsZero() || !zero.AllowsAPI("anything") || !zero.AllowsChannel(auth.ChannelMCP) ||
		!zero.AllowsAddr(netip.Addr{}) || zero.Expired(t0) || !zero.ExpiresAt().IsZero() {
		t.Error("the zero Restrictions restricts something")
	}
	if s := zero.Spec(); !reflect.DeepEqual(s, auth.RestrictionSpec{}) {
		t.Errorf("zero Spec() = %+v", s)
	}
	for _, spec := range []auth.RestrictionSpec{
		{APIs: []string{"a"}}, {Channels: []string{"rest"}}, {AllowedIPs: []string{"10.0.0.0/8"}}, {ExpiresAt: at(t0)},
	} {
		if mustRestrictions(t, spec).IsZero() {
			t.Errorf("NewRestrictions(%+v).IsZero() = true", spec)
		}
	}
}

func TestRestrictionsAllowsAPI(t *testing.T) {
	r := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather", "geo-ip", "dns-lookup"}})
	tests := []struct {
		id   string
		want bool
	}{
		{"weather", true}, {"geo-ip", true}, {"dns-lookup", true},
		{"stocks", false}, {"", false}, {"Weather", false}, {"weathe", false}, {"weather2", false}, {"a", false}, {"zzz", false},
	}
	for _, tt := range tests {
		if got := r.AllowsAPI(tt.id); got != tt.want {
			t.Errorf("AllowsAPI(%q) = %v; want %v", tt.id, got, tt.want)
		}
	}
	// Restrictions on other things allow every API.
	if !mustRestrictions(t, auth.RestrictionSpec{Channels: []string{"rest"}}).AllowsAPI("stocks") {
		t.Error("a channel-only restriction refuses an API")
	}
}

func TestRestrictionsAllowsChannel(t *testing.T) {
	tests := []struct {
		channels []string
		ch       auth.Channel
		want     bool
	}{
		{nil, auth.ChannelREST, true},
		{nil, auth.ChannelMCP, true},
		{[]string{"rest"}, auth.ChannelREST, true},
		{[]string{"rest"}, auth.ChannelGraphQL, false},
		{[]string{"rest"}, auth.ChannelMCP, false},
		{[]string{"graphql", "mcp"}, auth.ChannelREST, false},
		{[]string{"graphql", "mcp"}, auth.ChannelGraphQL, true},
		{[]string{"graphql", "mcp"}, auth.ChannelMCP, true},
	}
	for _, tt := range tests {
		r := mustRestrictions(t, auth.RestrictionSpec{Channels: tt.channels, APIs: []string{"x"}})
		if got := r.AllowsChannel(tt.ch); got != tt.want {
			t.Errorf("channels %v: AllowsChannel(%v) = %v; want %v", tt.channels, tt.ch, got, tt.want)
		}
	}
}

func TestRestrictionsAllowsAddr(t *testing.T) {
	r := mustRestrictions(t, auth.RestrictionSpec{AllowedIPs: []string{"10.0.0.0/8", "203.0.113.7", "2001:db8::/32"}})
	tests := []struct {
		addr netip.Addr
		want bool
	}{
		{addr("10.0.0.0"), true},
		{addr("10.255.255.255"), true},
		{addr("11.0.0.0"), false},
		{addr("9.255.255.255"), false},
		{addr("203.0.113.7"), true},
		{addr("203.0.113.8"), false},
		{addr("::ffff:10.1.2.3"), true}, // IPv4-mapped is unmapped
		{addr("::ffff:203.0.113.7"), true},
		{addr("2001:db8:1::1"), true},
		{addr("2001:db9::1"), false},
		{addr("::1"), false},
		{addr("127.0.0.1"), false},
		{netip.Addr{}, false}, // an unknown address is refused by a list
	}
	for _, tt := range tests {
		if got := r.AllowsAddr(tt.addr); got != tt.want {
			t.Errorf("AllowsAddr(%v) = %v; want %v", tt.addr, got, tt.want)
		}
	}
	// An IPv4-mapped prefix in the list matches the IPv4 addresses it maps.
	mapped := mustRestrictions(t, auth.RestrictionSpec{AllowedIPs: []string{"::ffff:192.0.2.0/120"}})
	if !mapped.AllowsAddr(addr("192.0.2.1")) || !mapped.AllowsAddr(addr("::ffff:192.0.2.1")) || mapped.AllowsAddr(addr("192.0.3.1")) {
		t.Errorf("IPv4-mapped prefix %v does not match its IPv4 addresses", mapped.Spec().AllowedIPs)
	}
	// Without a list every address, even an unknown one, is allowed.
	noList := mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"x"}})
	if !noList.AllowsAddr(netip.Addr{}) || !noList.AllowsAddr(addr("198.51.100.1")) {
		t.Error("restrictions without an address list refuse an address")
	}
}

func TestRestrictionsExpired(t *testing.T) {
	r := mustRestrictions(t, auth.RestrictionSpec{ExpiresAt: at(t0)})
	tests := []struct {
		now  time.Time
		want bool
	}{
		{t0.Add(-time.Hour), false},
		{t0.Add(-time.Nanosecond), false},
		{t0, true}, // exactly at the expiry: expired
		{t0.In(time.FixedZone("UTC-5", -5*3600)), true},
		{t0.Add(time.Nanosecond), true},
		{t0.Add(24 * time.Hour), true},
	}
	for _, tt := range tests {
		if got := r.Expired(tt.now); got != tt.want {
			t.Errorf("Expired(%v) = %v; want %v", tt.now, got, tt.want)
		}
	}
	if !r.ExpiresAt().Equal(t0) {
		t.Errorf("ExpiresAt() = %v; want %v", r.ExpiresAt(), t0)
	}
	if mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"x"}}).Expired(t0.Add(100 * 365 * 24 * time.Hour)) {
		t.Error("restrictions without an expiry expired")
	}
}

func TestRestrictionsJSON(t *testing.T) {
	tests := []struct {
		name string
		spec auth.RestrictionSpec
		json string
	}{
		{"zero", auth.RestrictionSpec{}, `{}`},
		{"apis", auth.RestrictionSpec{APIs: []string{"b", "a"}}, `{"apis":["a","b"]}`},
		{"everything", auth.RestrictionSpec{
			APIs:       []string{"weather"},
			Channels:   []string{"mcp", "rest"},
			AllowedIPs: []string{"10.0.0.0/8", "2001:db8::1"},
			ExpiresAt:  at(t0.Add(90 * time.Minute)),
		}, `{"apis":["weather"],"channels":["rest","mcp"],"allowed_ips":["10.0.0.0/8","2001:db8::1/128"],"expires_at":"2030-01-01T01:30:00Z"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRestrictions(t, tt.spec)
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.json {
				t.Fatalf("Marshal = %s; want %s", b, tt.json)
			}
			var back auth.Restrictions
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if got, want := back.Spec(), r.Spec(); !reflect.DeepEqual(got.APIs, want.APIs) ||
				!reflect.DeepEqual(got.Channels, want.Channels) || !reflect.DeepEqual(got.AllowedIPs, want.AllowedIPs) ||
				(got.ExpiresAt == nil) != (want.ExpiresAt == nil) || (got.ExpiresAt != nil && !got.ExpiresAt.Equal(*want.ExpiresAt)) {
				t.Fatalf("round trip = %+v; want %+v", got, want)
			}
			if back.IsZero() != r.IsZero() || !back.ExpiresAt().Equal(r.ExpiresAt()) {
				t.Fatalf("round trip changed IsZero or ExpiresAt")
			}
		})
	}

	// Inside a struct, as a key record would be encoded.
	type rec struct {
		Name         string            `json:"name"`
		Restrictions auth.Restrictions `json:"restrictions"`
	}
	in := rec{"ci", mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"weather"}, ExpiresAt: at(t0)})}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out rec
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Restrictions.ExpiresAt().Equal(t0) || !out.Restrictions.AllowsAPI("weather") || out.Restrictions.AllowsAPI("geo") {
		t.Errorf("struct round trip = %s -> %+v", b, out.Restrictions.Spec())
	}

	// Decoding normalizes and checks.
	var r auth.Restrictions
	if err := json.Unmarshal([]byte(`{"allowed_ips":["10.9.9.9/8"],"apis":["b","a","b"]}`), &r); err != nil {
		t.Fatal(err)
	}
	if s := r.Spec(); !reflect.DeepEqual(s.AllowedIPs, []string{"10.0.0.0/8"}) || !reflect.DeepEqual(s.APIs, []string{"a", "b"}) {
		t.Errorf("decoded spec = %+v; want normalized", s)
	}
	for _, bad := range []string{
		`{"channels":["grpc"]}`,
		`{"apis":["Not Valid"]}`,
		`{"allowed_ips":["nope"]}`,
		`{"expires_at":"0001-01-01T00:00:00Z"}`,
	} {
		var r auth.Restrictions
		if err := json.Unmarshal([]byte(bad), &r); !errors.Is(err, auth.ErrInvalid) {
			t.Errorf("Unmarshal(%s) error = %v; want ErrInvalid", bad, err)
		}
	}
	for _, bad := range []string{`{"apis":"weather"}`, `[]`, `{"expires_at":"tomorrow"}`} {
		var r auth.Restrictions
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
	// An empty object decodes to no restrictions, replacing what was there.
	r = mustRestrictions(t, auth.RestrictionSpec{APIs: []string{"a"}})
	if err := json.Unmarshal([]byte(`{}`), &r); err != nil || !r.IsZero() {
		t.Errorf("Unmarshal({}) = %+v, %v; want zero", r.Spec(), err)
	}
}

func TestRestrictionsSpecIsACopy(t *testing.T) {
	r := mustRestrictions(t, auth.RestrictionSpec{
		APIs:       []string{"a", "b"},
		Channels:   []string{"rest"},
		AllowedIPs: []string{"10.0.0.0/8"},
		ExpiresAt:  at(t0),
	})
	s := r.Spec()
	s.APIs[0] = "zzz"
	s.APIs = append(s.APIs, "c")
	s.Channels[0] = "mcp"
	s.AllowedIPs[0] = "0.0.0.0/0"
	*s.ExpiresAt = t0.Add(1000 * time.Hour)

	if !r.AllowsAPI("a") || r.AllowsAPI("zzz") || r.AllowsAPI("c") {
		t.Error("changing Spec().APIs changed the restrictions")
	}
	if !r.AllowsChannel(auth.ChannelREST) || r.AllowsChannel(auth.ChannelMCP) {
		t.Error("changing Spec().Channels changed the restrictions")
	}
	if r.AllowsAddr(addr("192.0.2.1")) {
		t.Error("changing Spec().AllowedIPs changed the restrictions")
	}
	if !r.ExpiresAt().Equal(t0) || !r.Expired(t0) {
		t.Error("changing *Spec().ExpiresAt changed the restrictions")
	}
	if again := r.Spec(); again.APIs[0] != "a" || again.Channels[0] != "rest" || again.AllowedIPs[0] != "10.0.0.0/8" || !again.ExpiresAt.Equal(t0) {
		t.Errorf("a second Spec() = %+v", again)
	}

	// Nor does changing the spec the restrictions were built from.
	in := auth.RestrictionSpec{APIs: []string{"a"}, ExpiresAt: at(t0)}
	r = mustRestrictions(t, in)
	in.APIs[0] = "b"
	*in.ExpiresAt = t0.Add(time.Hour)
	if !r.AllowsAPI("a") || r.AllowsAPI("b") || !r.ExpiresAt().Equal(t0) {
		t.Error("changing the input spec changed the restrictions")
	}
}

func TestRestrictionsWithin(t *testing.T) {
	type spec = auth.RestrictionSpec
	tests := []struct {
		name         string
		inner, outer spec
		widens       string // "" when inner is within outer; else a part of the message
	}{
		{"both unrestricted", spec{}, spec{}, ""},
		{"anything within an unrestricted account", spec{APIs: []string{"a"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0)}, spec{}, ""},
		{"equal", spec{APIs: []string{"a"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0)},
			spec{APIs: []string{"a"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0)}, ""},

		// APIs
		{"APIs subset", spec{APIs: []string{"b"}}, spec{APIs: []string{"a", "b", "c"}}, ""},
		{"APIs extra", spec{APIs: []string{"a", "d"}}, spec{APIs: []string{"a", "b"}}, `API "d"`},
		{"APIs unrestricted against a list", spec{}, spec{APIs: []string{"a", "b"}}, "APIs a, b"},
		{"APIs unrestricted, other parts narrowed", spec{Channels: []string{"rest"}}, spec{APIs: []string{"a"}}, "APIs a"},

		// Channels
		{"channels subset", spec{Channels: []string{"rest"}}, spec{Channels: []string{"rest", "mcp"}}, ""},
		{"channels extra", spec{Channels: []string{"rest", "graphql"}}, spec{Channels: []string{"rest", "mcp"}}, "channels rest, mcp"},
		{"channels disjoint", spec{Channels: []string{"graphql"}}, spec{Channels: []string{"rest"}}, "channels rest"},
		{"channels unrestricted against a list", spec{}, spec{Channels: []string{"mcp"}}, "channels mcp"},

		// Addresses
		{"a /16 inside a /8", spec{AllowedIPs: []string{"10.1.0.0/16"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, ""},
		{"a host inside a /8", spec{AllowedIPs: []string{"10.1.2.3"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, ""},
		{"each inside one of several", spec{AllowedIPs: []string{"10.1.0.0/16", "2001:db8:1::/48"}}, spec{AllowedIPs: []string{"10.0.0.0/8", "2001:db8::/32"}}, ""},
		{"a /8 against a /16", spec{AllowedIPs: []string{"10.0.0.0/8"}}, spec{AllowedIPs: []string{"10.1.0.0/16"}}, "addresses 10.0.0.0/8"},
		{"a /8 against a /16 at the same base", spec{AllowedIPs: []string{"10.0.0.0/8"}}, spec{AllowedIPs: []string{"10.0.0.0/16"}}, "addresses 10.0.0.0/8"},
		{"a /0 against a /8", spec{AllowedIPs: []string{"0.0.0.0/0"}}, spec{AllowedIPs: []string{"0.0.0.0/8"}}, "addresses 0.0.0.0/0"},
		{"a /16 outside the /8", spec{AllowedIPs: []string{"11.1.0.0/16"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, "addresses 11.1.0.0/16"},
		{"one of two outside", spec{AllowedIPs: []string{"10.1.0.0/16", "192.0.2.0/24"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, "192.0.2.0/24"},
		{"IPv6 against IPv4", spec{AllowedIPs: []string{"2001:db8::/32"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, "2001:db8::/32"},
		{"IPv4-mapped IPv6 prefix is the IPv4 prefix", spec{AllowedIPs: []string{"::ffff:10.1.0.0/112"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, ""},
		{"IPv4-mapped IPv6 prefix too wide", spec{AllowedIPs: []string{"::ffff:10.0.0.0/100"}}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, "addresses 0.0.0.0/4"},
		{"addresses unrestricted against a list", spec{}, spec{AllowedIPs: []string{"10.0.0.0/8"}}, "used only from 10.0.0.0/8"},

		// Expiry
		{"expires earlier", spec{ExpiresAt: at(t0)}, spec{ExpiresAt: at(t0.Add(time.Hour))}, ""},
		{"expires at the same moment", spec{ExpiresAt: at(t0)}, spec{ExpiresAt: at(t0)}, ""},
		{"expires later", spec{ExpiresAt: at(t0.Add(time.Second))}, spec{ExpiresAt: at(t0)}, "expires at 2030-01-01T00:00:00Z"},
		{"no expiry against an expiring account", spec{APIs: []string{"a"}}, spec{ExpiresAt: at(t0)}, "expires at 2030-01-01T00:00:00Z"},

		// Narrowing in other parts never hides widening in one.
		{"narrower APIs, wider channels", spec{APIs: []string{"a"}, Channels: []string{"rest", "mcp"}}, spec{APIs: []string{"a", "b"}, Channels: []string{"rest"}}, "channels"},
		{"everything narrower", spec{APIs: []string{"a"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.1.0.0/16"}, ExpiresAt: at(t0)},
			spec{APIs: []string{"a", "b"}, Channels: []string{"rest", "graphql"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0.Add(time.Hour))}, ""},
		{"everything narrower but the expiry", spec{APIs: []string{"a"}, Channels: []string{"rest"}, AllowedIPs: []string{"10.1.0.0/16"}},
			spec{APIs: []string{"a", "b"}, Channels: []string{"rest", "graphql"}, AllowedIPs: []string{"10.0.0.0/8"}, ExpiresAt: at(t0.Add(time.Hour))}, "expires"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner, outer := mustRestrictions(t, tt.inner), mustRestrictions(t, tt.outer)
			err := inner.Within(outer)
			if tt.widens == "" {
				if err != nil {
					t.Fatalf("Within = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, auth.ErrWidens) {
				t.Fatalf("Within = %v; want an error wrapping ErrWidens", err)
			}
			if !strings.Contains(err.Error(), tt.widens) {
				t.Fatalf("Within = %q; want it to mention %q", err, tt.widens)
			}
		})
	}
}
