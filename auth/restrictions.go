package auth

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// A Channel is a protocol through which keys reach the catalog.
type Channel uint8

// The channels. A key restricted to some channels is refused on the others.
const (
	ChannelREST Channel = 1 << iota
	ChannelGraphQL
	ChannelMCP
	// ChannelBatch is REST's batch requests (POST /v1/{api_id}/batch): a key limited to
	// other channels, rest among them, cannot send many inputs in one request.
	ChannelBatch
)

var channelNames = []struct {
	ch   Channel
	name string
}{{ChannelREST, "rest"}, {ChannelGraphQL, "graphql"}, {ChannelMCP, "mcp"}, {ChannelBatch, "batch"}}

// ChannelNames returns the names of the channels, in their order: "rest", "graphql",
// "mcp", "batch".
func ChannelNames() []string {
	names := make([]string, len(channelNames))
	for i, n := range channelNames {
		names[i] = n.name
	}
	return names
}

// String returns the channel's name: "rest", "graphql", "mcp" or "batch".
func (c Channel) String() string {
	for _, n := range channelNames {
		if n.ch == c {
			return n.name
		}
	}
	return fmt.Sprintf("channel(%d)", uint8(c))
}

// ParseChannel returns the channel with the given name.
func ParseChannel(name string) (Channel, error) {
	for _, n := range channelNames {
		if n.name == name {
			return n.ch, nil
		}
	}
	return 0, invalidf("unknown channel %q: use rest, graphql, mcp or batch", name)
}

// Restrictions narrow what an account or a key may do: which APIs it may call, over which
// channels, from which addresses, and until when. The zero value restricts nothing.
//
// A Restrictions value is immutable: it is built by [NewRestrictions] (or decoded from
// JSON) and read through its methods, so keys can be copied and shared freely.
type Restrictions struct {
	r *restrictions
}

type restrictions struct {
	apis     []string       // sorted, unique; empty = every API
	channels Channel        // bit set; 0 = every channel
	ips      []netip.Prefix // masked; empty = any address
	expires  time.Time      // zero = never
}

// RestrictionSpec is the plain form of [Restrictions], used to build them and to read
// them back. Empty fields restrict nothing.
type RestrictionSpec struct {
	// APIs lists the API ids the key may call.
	APIs []string `json:"apis,omitempty"`
	// Channels lists the channels the key may use: "rest", "graphql", "mcp", "batch".
	Channels []string `json:"channels,omitempty"`
	// AllowedIPs lists the addresses (CIDR prefixes or single addresses) that may use
	// the key.
	AllowedIPs []string `json:"allowed_ips,omitempty"`
	// ExpiresAt is the moment the key stops working.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// NewRestrictions checks and builds restrictions from their plain form. API ids must be
// lowercase letters, digits and hyphens; channels must be known; addresses must be CIDR
// prefixes ("10.0.0.0/8") or single addresses ("203.0.113.7").
func NewRestrictions(spec RestrictionSpec) (Restrictions, error) {
	var r restrictions
	for _, id := range spec.APIs {
		if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return Restrictions{}, invalidf("api %q: an API id is made of lowercase letters, digits and hyphens", id)
		}
		r.apis = append(r.apis, id)
	}
	slices.Sort(r.apis)
	r.apis = slices.Compact(r.apis)
	for _, name := range spec.Channels {
		ch, err := ParseChannel(name)
		if err != nil {
			return Restrictions{}, err
		}
		r.channels |= ch
	}
	for _, s := range spec.AllowedIPs {
		p, err := parsePrefix(s)
		if err != nil {
			return Restrictions{}, err
		}
		r.ips = append(r.ips, p)
	}
	slices.SortFunc(r.ips, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	r.ips = slices.Compact(r.ips)
	if spec.ExpiresAt != nil {
		if spec.ExpiresAt.IsZero() {
			return Restrictions{}, invalidf("expires_at: give a moment, or leave it out for a key that never expires")
		}
		r.expires = spec.ExpiresAt.UTC()
	}
	if len(r.apis) == 0 && r.channels == 0 && len(r.ips) == 0 && r.expires.IsZero() {
		return Restrictions{}, nil
	}
	return Restrictions{&r}, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, invalidf("allowed_ips: %q is not a CIDR prefix such as 10.0.0.0/8", s)
		}
		p = p.Masked()
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			// Addresses are unmapped before they are checked (as single addresses are
			// here), so an IPv4-mapped prefix must be too, or it would match nothing.
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, invalidf("allowed_ips: %q is not an address or a CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Spec returns the plain form of r, in a copy the caller may change.
func (r Restrictions) Spec() RestrictionSpec {
	var s RestrictionSpec
	if r.r == nil {
		return s
	}
	s.APIs = slices.Clone(r.r.apis)
	for _, n := range channelNames {
		if r.r.channels&n.ch != 0 {
			s.Channels = append(s.Channels, n.name)
		}
	}
	for _, p := range r.r.ips {
		s.AllowedIPs = append(s.AllowedIPs, p.String())
	}
	if !r.r.expires.IsZero() {
		t := r.r.expires
		s.ExpiresAt = &t
	}
	return s
}

// IsZero reports whether r restricts nothing.
func (r Restrictions) IsZero() bool { return r.r == nil }

// ExpiresAt returns when the key expires, or the zero time if it never does.
func (r Restrictions) ExpiresAt() time.Time {
	if r.r == nil {
		return time.Time{}
	}
	return r.r.expires
}

// AllowsAPI reports whether r allows calls to the API with the given id.
func (r Restrictions) AllowsAPI(id string) bool {
	if r.r == nil || len(r.r.apis) == 0 {
		return true
	}
	_, found := slices.BinarySearch(r.r.apis, id)
	return found
}

// AllowsChannel reports whether r allows the channel.
func (r Restrictions) AllowsChannel(ch Channel) bool {
	return r.r == nil || r.r.channels == 0 || r.r.channels&ch != 0
}

// AllowsAddr reports whether r allows requests from addr. An invalid addr is allowed
// only when r has no address list.
func (r Restrictions) AllowsAddr(addr netip.Addr) bool {
	if r.r == nil || len(r.r.ips) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range r.r.ips {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// Expired reports whether r has an expiry that is at or before now.
func (r Restrictions) Expired(now time.Time) bool {
	return r.r != nil && !r.r.expires.IsZero() && !now.Before(r.r.expires)
}

// Within reports, as an error wrapping [ErrWidens], the first way in which r allows
// more than outer: an API, channel, address range or lifetime that outer does not allow.
// A sub-key's restrictions must be within its account's.
func (r Restrictions) Within(outer Restrictions) error { return r.WithinOf(outer, "the account") }

// WithinOf is [Restrictions.Within] with the owner of outer named in the message ("the
// account", "your key"). The message begins with the field that widens: apis,
// channels, allowed_ips or expires_at.
func (r Restrictions) WithinOf(outer Restrictions, owner string) error {
	if outer.r == nil {
		return nil
	}
	o, in := outer.r, r.r
	if in == nil {
		in = &restrictions{}
	}
	if len(o.apis) > 0 {
		if len(in.apis) == 0 {
			return widens("apis: %s may call only the APIs %s; list the key's APIs among them", owner, strings.Join(o.apis, ", "))
		}
		for _, id := range in.apis {
			if _, ok := slices.BinarySearch(o.apis, id); !ok {
				return widens("apis: API %q is not allowed for %s, which may call only %s", id, owner, strings.Join(o.apis, ", "))
			}
		}
	}
	if o.channels != 0 && (in.channels == 0 || in.channels&^o.channels != 0) {
		return widens("channels: %s may use only the channels %s", owner, strings.Join(outer.Spec().Channels, ", "))
	}
	if len(o.ips) > 0 {
		if len(in.ips) == 0 {
			return widens("allowed_ips: %s may be used only from %s; give the key allowed_ips within them", owner, strings.Join(outer.Spec().AllowedIPs, ", "))
		}
		for _, p := range in.ips {
			if !slices.ContainsFunc(o.ips, func(op netip.Prefix) bool { return op.Bits() <= p.Bits() && op.Contains(p.Addr()) }) {
				return widens("allowed_ips: addresses %s are outside the allowed addresses of %s, %s", p, owner, strings.Join(outer.Spec().AllowedIPs, ", "))
			}
		}
	}
	if !o.expires.IsZero() && (in.expires.IsZero() || in.expires.After(o.expires)) {
		return widens("expires_at: %s expires at %s; the key must expire no later", owner, o.expires.Format(time.RFC3339))
	}
	return nil
}

func widens(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrWidens, fmt.Sprintf(format, args...))
}

// MarshalJSON encodes r in its plain form ([RestrictionSpec]).
func (r Restrictions) MarshalJSON() ([]byte, error) { return json.Marshal(r.Spec()) }

// UnmarshalJSON decodes and checks the plain form ([RestrictionSpec]).
func (r *Restrictions) UnmarshalJSON(b []byte) error {
	var s RestrictionSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	nr, err := NewRestrictions(s)
	if err != nil {
		return err
	}
	*r = nr
	return nil
}
