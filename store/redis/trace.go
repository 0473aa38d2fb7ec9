package redis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/tollgate/event"
)

// Hook returns a go-redis hook that tells t of each round trip the client makes, as
// an [event.StepStore] phase under the context of the work that made it: a command, or
// a pipeline of them. Add it to the client the stores run on:
//
//	client.AddHook(redis.Hook(tracer)) // a tracing.Tracer, or a service's Events()
//
// A Store with [Options.Replicas] on a Cluster sends its writes on the clients of the
// nodes, which a Cluster client's hooks do not see: add it to the nodes' clients
// instead, before the first call, which traces every round trip once:
//
//	client.OnNewNode(func(n *goredis.Client) { n.AddHook(redis.Hook(tracer)) })
//
// The phase names the command (Operation "EVALSHA", "GET"; "PIPELINE" or "MULTI" for
// several sent together, with their number in Batch) and, for a script of this
// package, the script (Procedure "admit"). A command's arguments (keys, which hold
// account ids and key hashes, and values) are never told. A reply of nothing
// (redis.Nil) is a success; any other error ends the phase with it.
func Hook(t event.Tracer) goredis.Hook { return hook{t} }

type hook struct{ t event.Tracer }

// DialHook leaves dials alone: they are the pool's, not the stores' round trips.
func (h hook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// ProcessHook wraps a command in its phase.
func (h hook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		ctx, end := h.t.Begin(ctx, event.Phase{Step: event.StepStore, Store: "redis",
			Operation: strings.ToUpper(cmd.Name()), Procedure: script(cmd)})
		err := next(ctx, cmd)
		end(failure(err))
		return err
	}
}

// ProcessPipelineHook wraps a pipeline in its phase.
func (h hook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		p := event.Phase{Step: event.StepStore, Store: "redis", Operation: "PIPELINE", Batch: len(cmds)}
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			p.Operation = "MULTI"
		}
		first := true
		for _, cmd := range cmds {
			if isFence(cmd) {
				continue // the fence and WAIT that follow writes (see Options.Replicas)
			}
			name := script(cmd)
			if !first && name != p.Procedure {
				p.Procedure = ""
				break
			}
			p.Procedure, first = name, false
		}
		ctx, end := h.t.Begin(ctx, p)
		err := next(ctx, cmds)
		end(failure(err))
		return err
	}
}

// script returns the name of this package's script that cmd runs, if it runs one.
func script(cmd goredis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	arg, ok := args[1].(string)
	if !ok {
		return ""
	}
	switch cmd.Name() {
	case "evalsha", "evalsha_ro":
		return scriptNames[arg]
	case "eval", "eval_ro":
		sum := sha1.Sum([]byte(arg))
		return scriptNames[hex.EncodeToString(sum[:])]
	}
	return ""
}

// isFence reports whether cmd is the fence or the WAIT that follow the writes of a
// pipeline with Options.Replicas (see replication).
func isFence(cmd goredis.Cmder) bool {
	switch cmd.Name() {
	case "wait":
		return true
	case "set":
		key, _ := cmd.Args()[1].(string)
		return strings.HasSuffix(key, fenceSuffix) && strings.Contains(key, ":{~w")
	}
	return false
}

// failure returns err, unless it is Redis's reply of nothing.
func failure(err error) error {
	if errors.Is(err, goredis.Nil) {
		return nil
	}
	return err
}
