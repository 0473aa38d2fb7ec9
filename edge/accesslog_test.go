package edge_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
)

func TestRedactPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/v1/hash", "/v1/hash"},
		{"/v1/1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "/v1/[redacted]"},
		{"/v1/1B4E28BA-2FA1-4D3B-A3F5-EF19B5A7633B/x", "/v1/[redacted]/x"},
		{"/a/" + "0123456789abcdef0123456789abcdef", "/a/[redacted]"},
		{"/a/" + "0123456789abcdef0123456789abcde", "/a/0123456789abcdef0123456789abcde"}, // 31 digits
		{"/admin/v1/keys/key_6eccdc3fea8ebc865f32", "/admin/v1/keys/key_6eccdc3fea8ebc865f32"},
		{"/x/" + "ab" + "1b4e28ba2fa14d3ba3f5ef19b5a7633b" + "/y", "/x/[redacted]/y"},
	} {
		if got := edge.RedactPath(tc.in); got != tc.want {
			t.Errorf("RedactPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
