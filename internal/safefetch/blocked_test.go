package safefetch

import (
	"net/netip"
	"testing"
)

func TestBlocked(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // "" means the address must be allowed
	}{
		// Loopback.
		{"127.0.0.1", reasonLoopback},
		{"127.0.0.2", reasonLoopback},
		{"127.255.255.254", reasonLoopback},
		{"::1", reasonLoopback},

		// Private.
		{"10.0.0.1", reasonPrivate},
		{"10.255.255.255", reasonPrivate},
		{"172.16.0.1", reasonPrivate},
		{"172.31.255.255", reasonPrivate},
		{"192.168.1.1", reasonPrivate},
		{"fc00::1", reasonPrivate},
		{"fd12:3456:789a::1", reasonPrivate},
		{"fec0::1", reasonPrivate},

		// Link-local.
		{"169.254.0.1", reasonLinkLocal},
		{"169.254.255.255", reasonLinkLocal},
		{"fe80::1", reasonLinkLocal},
		{"fe80::1%eth0", reasonLinkLocal},

		// Multicast.
		{"224.0.0.1", reasonMulticast},
		{"239.255.255.250", reasonMulticast},
		{"ff02::1", reasonMulticast},
		{"ff0e::1", reasonMulticast},

		// Unspecified, "this network", broadcast.
		{"0.0.0.0", reasonUnspecified},
		{"::", reasonUnspecified},
		{"0.1.2.3", reasonReserved},
		{"255.255.255.255", reasonBroadcast},

		// Shared address space (carrier-grade NAT).
		{"100.64.0.1", reasonSharedNAT},
		{"100.127.255.255", reasonSharedNAT},

		// IETF protocol assignments, 6to4 relay, reserved.
		{"192.0.0.8", reasonReserved},
		{"192.0.0.170", reasonReserved},
		{"192.88.99.1", reasonReserved},
		{"240.0.0.1", reasonReserved},
		{"250.1.2.3", reasonReserved},

		// Benchmarking.
		{"198.18.0.1", reasonBenchmarking},
		{"198.19.255.255", reasonBenchmarking},
		{"2001:2::1", reasonBenchmarking},

		// Documentation.
		{"192.0.2.1", reasonDocumentation},
		{"198.51.100.7", reasonDocumentation},
		{"203.0.113.9", reasonDocumentation},
		{"2001:db8::1", reasonDocumentation},
		{"3fff::1", reasonDocumentation},

		// Cloud metadata.
		{"169.254.169.254", reasonMetadata},
		{"169.254.170.2", reasonMetadata},
		{"100.100.100.200", reasonMetadata},
		{"192.0.0.192", reasonMetadata},
		{"168.63.129.16", reasonMetadata},
		{"fd00:ec2::254", reasonMetadata},

		// IPv4-mapped IPv6 is judged as IPv4.
		{"::ffff:10.0.0.1", reasonPrivate},
		{"::ffff:127.0.0.1", reasonLoopback},
		{"::ffff:169.254.169.254", reasonMetadata},
		{"::ffff:0.0.0.0", reasonUnspecified},
		{"::ffff:8.8.8.8", ""},

		// NAT64 is judged by the embedded IPv4 address.
		{"64:ff9b::10.0.0.1", reasonPrivate},
		{"64:ff9b::7f00:1", reasonLoopback},
		{"64:ff9b::a9fe:a9fe", reasonMetadata},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::1", reasonReserved}, // local-use NAT64 prefix

		// 6to4 is judged by the embedded IPv4 address.
		{"2002:a00:1::1", reasonPrivate},
		{"2002:7f00:1::", reasonLoopback},
		{"2002:a9fe:a9fe::1", reasonMetadata},
		{"2002:c000:201::", reasonDocumentation},
		{"2002:808:808::1", ""},

		// Other IPv6 outside public unicast space.
		{"2001::1", reasonReserved},                                   // Teredo
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", reasonReserved},      // Teredo
		{"2001:20::1", reasonReserved},                                // ORCHIDv2
		{"::10.0.0.1", reasonReserved},                                // IPv4-compatible
		{"::ffff:0:a00:1", reasonReserved},                            // IPv4-translated
		{"100::1", reasonReserved},                                    // discard-only
		{"4000::1", reasonReserved},                                   // unallocated
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2%eth0", reasonReserved}, // zone ignored

		// Public addresses, including neighbours of blocked ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.215.14", ""},
		{"9.255.255.255", ""},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.128.0.1", ""},
		{"172.15.255.255", ""},
		{"172.32.0.1", ""},
		{"192.0.1.1", ""},
		{"198.17.255.255", ""},
		{"198.20.0.1", ""},
		{"223.255.255.255", ""},
		{"2606:4700::1111", ""},
		{"2001:4860:4860::8888", ""},
		{"2a00:1450:4001::1", ""},
		{"2001:200::1", ""},
	}
	for _, tt := range tests {
		addr := netip.MustParseAddr(tt.addr)
		reason, blocked := Blocked(addr)
		if blocked != (tt.reason != "") || reason != tt.reason {
			t.Errorf("Blocked(%s) = %q, %v; want %q, %v", tt.addr, reason, blocked, tt.reason, tt.reason != "")
		}
	}

	if reason, blocked := Blocked(netip.Addr{}); !blocked || reason != reasonInvalid {
		t.Errorf("Blocked(zero Addr) = %q, %v; want %q, true", reason, blocked, reasonInvalid)
	}
}
