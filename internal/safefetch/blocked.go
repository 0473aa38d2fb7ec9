package safefetch

import "net/netip"

// Reasons returned by Blocked. They complete the sentence "X is ...".
const (
	reasonInvalid       = "an invalid address"
	reasonMetadata      = "a cloud metadata address"
	reasonUnspecified   = "an unspecified address"
	reasonBroadcast     = "a broadcast address"
	reasonLoopback      = "a loopback address"
	reasonPrivate       = "a private address"
	reasonSharedNAT     = "a shared (carrier-grade NAT) address"
	reasonLinkLocal     = "a link-local address"
	reasonMulticast     = "a multicast address"
	reasonDocumentation = "a documentation address"
	reasonBenchmarking  = "a benchmarking address"
	reasonReserved      = "a reserved address"
)

// rule blocks every address in prefix for reason. Rules are tried in order,
// so the more specific ones come first.
type rule struct {
	prefix netip.Prefix
	reason string
}

func block(prefix, reason string) rule {
	return rule{netip.MustParsePrefix(prefix), reason}
}

// v4Rules lists the IPv4 ranges that are not public internet addresses.
var v4Rules = []rule{
	// Cloud metadata endpoints first, so they get the most useful reason.
	block("169.254.169.254/32", reasonMetadata), // AWS, GCP, Azure, OpenStack, DigitalOcean, ...
	block("169.254.170.2/32", reasonMetadata),   // AWS ECS task metadata and credentials
	block("100.100.100.200/32", reasonMetadata), // Alibaba Cloud
	block("192.0.0.192/32", reasonMetadata),     // Oracle Cloud
	block("168.63.129.16/32", reasonMetadata),   // Azure WireServer (a public address, but internal to Azure)

	block("0.0.0.0/32", reasonUnspecified),
	block("255.255.255.255/32", reasonBroadcast),
	block("0.0.0.0/8", reasonReserved), // "this network"
	block("10.0.0.0/8", reasonPrivate),
	block("100.64.0.0/10", reasonSharedNAT),
	block("127.0.0.0/8", reasonLoopback),
	block("169.254.0.0/16", reasonLinkLocal),
	block("172.16.0.0/12", reasonPrivate),
	block("192.0.0.0/24", reasonReserved), // IETF protocol assignments
	block("192.0.2.0/24", reasonDocumentation),
	block("192.88.99.0/24", reasonReserved), // former 6to4 relay anycast
	block("192.168.0.0/16", reasonPrivate),
	block("198.18.0.0/15", reasonBenchmarking),
	block("198.51.100.0/24", reasonDocumentation),
	block("203.0.113.0/24", reasonDocumentation),
	block("224.0.0.0/4", reasonMulticast),
	block("240.0.0.0/4", reasonReserved),
}

// v6Rules lists the IPv6 ranges that are not public internet addresses.
// Anything outside 2000::/3 is refused as well (see Blocked).
var v6Rules = []rule{
	block("fd00:ec2::254/128", reasonMetadata), // AWS instance metadata over IPv6

	block("::/128", reasonUnspecified),
	block("::1/128", reasonLoopback),
	block("fc00::/7", reasonPrivate),  // unique local addresses
	block("fec0::/10", reasonPrivate), // deprecated site-local addresses
	block("fe80::/10", reasonLinkLocal),
	block("ff00::/8", reasonMulticast),
	block("2001:db8::/32", reasonDocumentation),
	block("3fff::/20", reasonDocumentation),
	block("2001:2::/48", reasonBenchmarking),
	block("2001::/23", reasonReserved), // IETF protocol assignments: Teredo, ORCHID, ...
}

var (
	// globalUnicast is the only IPv6 space allocated for public unicast.
	globalUnicast = netip.MustParsePrefix("2000::/3")
	// nat64 embeds an IPv4 address in its last 32 bits (RFC 6052).
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// sixToFour embeds an IPv4 address in bits 16 to 47 (RFC 3056).
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Blocked reports whether addr must not be fetched from, and if so why, as a
// short phrase such as "a loopback address" or "a cloud metadata address".
// Only public internet addresses pass. IPv6 zones are ignored, IPv4-mapped
// IPv6 addresses are judged as IPv4, and NAT64 (64:ff9b::/96) and 6to4
// (2002::/16) addresses are judged by the IPv4 address they embed. An invalid
// (zero) address is blocked.
func Blocked(addr netip.Addr) (reason string, blocked bool) {
	if !addr.IsValid() {
		return reasonInvalid, true
	}
	addr = addr.WithZone("").Unmap()
	rules := v4Rules
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64.Contains(addr):
			return Blocked(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(addr):
			return Blocked(netip.AddrFrom4([4]byte(b[2:6])))
		}
		rules = v6Rules
	}
	for _, rl := range rules {
		if rl.prefix.Contains(addr) {
			return rl.reason, true
		}
	}
	if addr.Is6() && !globalUnicast.Contains(addr) {
		return reasonReserved, true
	}
	return "", false
}
