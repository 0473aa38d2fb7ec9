package redis_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestLuaFiles checks the files of lua/: each one that no other includes is a script of
// the package (Redis compiles its expanded text, and that text is the script the
// package runs), each one that another includes is included, and every include names a
// file that exists.
func TestLuaFiles(t *testing.T) {
	ctx, c := t.Context(), client(t)
	files := redis.LuaFiles()
	if len(files) == 0 {
		t.Fatal("no files in lua/")
	}
	included := map[string]bool{}
	for name, text := range files {
		for line := range strings.Lines(text) {
			if target, ok := strings.CutPrefix(strings.TrimSpace(line), "--#include "); ok {
				if _, exists := files[target]; !exists {
					t.Errorf("%s includes %s, which is not in lua/", name, target)
				}
				included[target] = true
			}
		}
	}
	scripts := map[string]string{} // hash -> name
	for name, sc := range redis.Scripts {
		scripts[sc.Hash()] = name
	}
	for name := range files {
		if included[name] {
			continue
		}
		src := redis.LuaSource(name)
		if strings.Contains(src, "--#include") {
			t.Errorf("%s: an include is left in the expanded text", name)
		}
		sha, err := c.ScriptLoad(ctx, src).Result()
		if err != nil {
			t.Errorf("%s: Redis does not compile it: %v", name, err)
			continue
		}
		if _, ok := scripts[sha]; !ok {
			t.Errorf("%s is neither a script of the package nor included by one", name)
		}
		delete(scripts, sha)
	}
	for _, name := range scripts {
		t.Errorf("script %s comes from no file of lua/ that stands alone", name)
	}
}
