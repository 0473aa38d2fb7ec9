package redis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/phasetest"
	"github.com/tollgate-dev/tollgate/store/redis"
)

// TestHook: with the hook on a client, each round trip is a phase begun under the
// context of the work that made it, naming the command (and this package's script it
// runs) but none of its arguments; a reply of nothing is a success.
func TestHook(t *testing.T) {
	c := newClient(addr(t), nil)
	defer c.Close()
	rec := &phasetest.Recorder{}
	c.AddHook(redis.Hook(rec))
	prefix := newPrefix(t, c)
	ctx := context.WithValue(context.Background(), phasetest.Key{}, "work")
	if err := c.Ping(ctx).Err(); err != nil { // the connection's own setup, before the phases below
		t.Fatal(err)
	}
	rec.Take()

	secret := prefix + ":a-key-never-told"
	if err := c.Get(ctx, secret).Err(); err != goredis.Nil {
		t.Fatalf("GET of a missing key: %v", err)
	}
	inUse := redis.Scripts["inUse"]
	if err := inUse.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	if err := inUse.Run(ctx, c, []string{secret}, "c", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		inUse.EvalSha(ctx, p, []string{secret}, "c", 1, 0)
		inUse.EvalSha(ctx, p, []string{secret}, "c", 2, 0)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Get(ctx, secret)
		inUse.EvalSha(ctx, p, []string{secret}, "c", 2, 0)
		return nil
	}); err != goredis.Nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, "NOSUCHCOMMAND").Err(); err == nil {
		t.Fatal("an unknown command succeeded")
	}

	var got []string
	for _, p := range rec.Take() {
		if p.Step != event.StepStore || p.Store != "redis" || p.Under != "work" || !p.Ended {
			t.Errorf("phase %+v: want a store phase of redis, under the work's context, ended", p)
		}
		if strings.Contains(fmt.Sprintf("%+v", p.Phase), "never-told") {
			t.Errorf("phase %+v tells an argument", p.Phase)
		}
		s := strings.TrimSpace(p.Operation + " " + p.Procedure)
		if p.Batch > 0 {
			s += fmt.Sprintf(" (%d)", p.Batch)
		}
		if p.Err != nil {
			s += ": failed"
		}
		got = append(got, s)
	}
	want := []string{"GET", "SCRIPT", "EVALSHA in_use", "PIPELINE in_use (2)", "PIPELINE (2)", "NOSUCHCOMMAND: failed"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("phases\n %s\nwant\n %s", strings.Join(got, "\n "), strings.Join(want, "\n "))
	}

	// EVAL, which runs a script Redis did not have yet, names it too; a script of
	// someone else's is not named.
	for _, tc := range []struct {
		cmd  goredis.Cmder
		want string
	}{
		{goredis.NewCmd(ctx, "eval", redis.ScriptSource("in_use.lua"), 1, secret), "in_use"},
		{goredis.NewCmd(ctx, "evalsha", goredis.NewScript("return 1").Hash(), 0), ""},
		{goredis.NewCmd(ctx, "eval", "return 1", 0), ""},
		{goredis.NewCmd(ctx, "get", inUse.Hash()), ""},
	} {
		if got := redis.ScriptName(tc.cmd); got != tc.want {
			t.Errorf("%v names %q, want %q", tc.cmd.Args()[:2], got, tc.want)
		}
	}
}

// TestHookFailingTracer: a tracer that returns a nil end or panics fails no command
// nor pipeline.
func TestHookFailingTracer(t *testing.T) {
	for _, how := range phasetest.Failures {
		t.Run(how, func(t *testing.T) {
			c := newClient(addr(t), nil)
			defer c.Close()
			f := &phasetest.Failing{How: how}
			c.AddHook(redis.Hook(f))
			prefix := newPrefix(t, c)
			if err := c.Set(t.Context(), prefix+":k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Pipelined(t.Context(), func(p goredis.Pipeliner) error {
				p.Get(t.Context(), prefix+":k")
				p.Del(t.Context(), prefix+":k")
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if f.Begun() < 2 {
				t.Errorf("the tracer was told of %d round trips, want 2 at least", f.Begun())
			}
		})
	}
}
