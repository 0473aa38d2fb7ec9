package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/edge"
)

// The limits of the endpoint bound what one key can make a process hold or build,
// whatever it sends (see the package documentation, Limits):
//
//   - a batch (protocol 2025-03-26 and earlier) holds at most MaxBatchMessages
//     messages, and a session that agreed on a later version takes none;
//   - the answer to one HTTP request is at most MaxAnswerBytes, as the handler counts
//     the results before they are encoded;
//   - the requests that are not billed (every method but tools/call) are limited per
//     key by a token bucket, apart from the plan's rate limit;
//   - live sessions are capped per key and per process (sessions.go).

// The defaults and bounds of the limits in [Options].
const (
	DefaultMaxBatchMessages = 50
	// MaxBatchMessagesLimit is the largest MaxBatchMessages a handler takes.
	MaxBatchMessagesLimit    = 100
	DefaultMaxAnswerBytes    = 4 << 20
	DefaultUnbilledBurst     = 100
	DefaultUnbilledPerMinute = 300
	DefaultMaxSessionsPerKey = 100
	DefaultMaxSessions       = 10_000
)

// CodeLimited is the JSON-RPC error code of a request refused by a limit of the
// endpoint: the key's unbilled requests beyond their rate (HTTP 429, rate_limited), a
// session beyond the caps (429 too_many_sessions per key, 503 per process), and a
// message of a request whose answer has reached its size (answer_too_large). Like
// [CodeUnauthorized], it is a server error apart from the codes the MCP SDKs use.
const CodeLimited = -32029

// limits are a handler's limits, with the defaults filled in.
type limits struct {
	maxBatch  int
	maxAnswer int64
	unbilled  *unbilled
}

// newLimits checks the limits of opts and fills in their defaults.
func newLimits(opts *Options) (limits, error) {
	l := limits{maxBatch: opts.MaxBatchMessages, maxAnswer: opts.MaxAnswerBytes}
	if l.maxBatch <= 0 {
		l.maxBatch = DefaultMaxBatchMessages
	}
	if l.maxBatch > MaxBatchMessagesLimit {
		return l, fmt.Errorf("mcp: Options.MaxBatchMessages is %d; it may be at most %d", l.maxBatch, MaxBatchMessagesLimit)
	}
	if l.maxAnswer <= 0 {
		l.maxAnswer = DefaultMaxAnswerBytes
	}
	burst, perMinute := opts.UnbilledBurst, opts.UnbilledPerMinute
	if burst <= 0 {
		burst = DefaultUnbilledBurst
	}
	if perMinute <= 0 {
		perMinute = DefaultUnbilledPerMinute
	}
	if burst < l.maxBatch {
		return l, fmt.Errorf("mcp: Options.UnbilledBurst (%d) is smaller than MaxBatchMessages (%d), so a batch of unbilled requests could never be served; raise it or lower MaxBatchMessages", burst, l.maxBatch)
	}
	l.unbilled = newUnbilled(burst, perMinute)
	return l, nil
}

// limit applies the limits that refuse a POST as a whole before the SDK reads it,
// once its envelope passed misuse: the session caps for an initialize that starts a
// session, then the key's unbilled requests. It answers a refusal and returns false;
// otherwise the returned slot (nil unless the request starts a session) is the
// session's, which the caller settles once the SDK has served the request.
func (h *Handler) limit(w http.ResponseWriter, r *http.Request, c *caller, m message) (*slot, bool) {
	var sl *slot
	if m.isCall() && m.method == methodInitialize && r.Header.Get(sessionHeader) == "" {
		var err error
		if sl, err = h.sessions.reserve(c); err != nil {
			h.door.CORS(w.Header(), r)
			status := http.StatusTooManyRequests
			if errors.Is(err, errProcessSessions) {
				status = http.StatusServiceUnavailable
			}
			writeRPCError(w, status, m.id, CodeLimited, "too_many_sessions", err.Error())
			return nil, false
		}
	}
	if n := unbilledRequests(m); n > 0 {
		if wait, ok := h.limits.unbilled.take(c.user, n, h.svc.Now()); !ok {
			h.sessions.settle(sl)
			hdr := w.Header()
			h.door.CORS(hdr, r)
			edge.SetRetryAfter(hdr, wait)
			writeRPCError(w, http.StatusTooManyRequests, m.id, CodeLimited, "rate_limited", fmt.Sprintf(
				"too many requests that are not billed (every method but tools/call): a key may send %d a minute, in bursts of at most %d; retry in %ds. Tool calls count against the plan's rate limit instead",
				h.limits.unbilled.perMinute, h.limits.unbilled.burst, ceilSeconds(wait)))
			return nil, false
		}
	}
	return sl, true
}

// unbilledRequests counts the requests of a message, or of a batch, that are not
// billed: those with an id and a method other than tools/call. Notifications and
// responses, which the server does not answer, are not counted.
func unbilledRequests(m message) int {
	if m.batch == nil {
		if m.isCall() && m.method != "" && m.method != methodCallTool {
			return 1
		}
		return 0
	}
	n := 0
	for _, b := range m.batch {
		if b.id != nil && b.method != "" && b.method != methodCallTool {
			n++
		}
	}
	return n
}

func ceilSeconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// unbilled limits the requests of each key that no plan bills (see unbilledRequests)
// with a token bucket: burst requests at once, refilled at perMinute a minute. A
// bucket that has refilled is forgotten, so the map holds only the keys that sent such
// requests lately.
type unbilled struct {
	burst, perMinute int

	mu      sync.Mutex
	buckets map[string]*bucket // by the caller's user (its key, or the account of a session token)
	sweepAt int                // the size of buckets at which full ones are swept
}

// A bucket is the tokens a key had at an instant.
type bucket struct {
	tokens float64
	at     time.Time
}

// minSweep is the smallest size of the map at which full buckets are swept.
const minSweep = 1024

func newUnbilled(burst, perMinute int) *unbilled {
	return &unbilled{burst: burst, perMinute: perMinute, buckets: map[string]*bucket{}, sweepAt: minSweep}
}

// take takes n tokens from user's bucket at now. When it holds fewer, it takes none
// and returns how long until it holds n.
func (u *unbilled) take(user string, n int, now time.Time) (wait time.Duration, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.buckets[user]
	if b == nil {
		if len(u.buckets) >= u.sweepAt {
			u.sweep(now)
		}
		b = &bucket{tokens: float64(u.burst), at: now}
		u.buckets[user] = b
	}
	b.refill(now, u)
	if need := float64(n); b.tokens < need {
		return time.Duration((need - b.tokens) / float64(u.perMinute) * float64(time.Minute)), false
	}
	b.tokens -= float64(n)
	return 0, true
}

// refill adds the tokens earned since the bucket's instant, up to the burst.
func (b *bucket) refill(now time.Time, u *unbilled) {
	if now.After(b.at) {
		b.tokens = min(float64(u.burst), b.tokens+now.Sub(b.at).Minutes()*float64(u.perMinute))
		b.at = now
	}
}

// sweep forgets the buckets that are full at now, and sets the next size to sweep at
// to twice what is left, so that sweeping costs O(1) a bucket.
func (u *unbilled) sweep(now time.Time) {
	for user, b := range u.buckets {
		if b.refill(now, u); b.tokens >= float64(u.burst) {
			delete(u.buckets, user)
		}
	}
	u.sweepAt = max(minSweep, 2*len(u.buckets))
}

// size returns how many buckets are kept, for the tests.
func (u *unbilled) size() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.buckets)
}

// The answer's budget. The handler counts the size of each result of a request as it
// leaves the method's handler, before the SDK encodes it, against the request's
// MaxAnswerBytes: a result that does not fit is replaced by an error, and so is every
// message of the request served after it, without running. A tool call whose result
// does not fit ran and was charged; its answer is a tool result with isError saying so.

// spend counts n bytes of answer against the request's budget of max bytes. It
// reports false, counting nothing, when they do not fit, and from then on for every
// request.
func (c *caller) spend(n, max int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overBudget || c.answered+n > max {
		c.overBudget = true
		return false
	}
	c.answered += n
	return true
}

// spent reports whether a result of the request did not fit its budget.
func (c *caller) spent() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overBudget
}

// errAnswerSpent refuses a message served after the answer reached its budget; it did
// not run.
func (h *Handler) errAnswerSpent() error {
	return newRPCError(CodeLimited, "answer_too_large", "not served: the answer to this HTTP request reached the "+
		strconv.FormatInt(h.limits.maxAnswer, 10)+" bytes it may hold; send the rest of the batch in another request")
}

// answerTooLarge answers a message whose result does not fit the answer's budget.
func (h *Handler) answerTooLarge(res sdk.Result, size int64) (sdk.Result, error) {
	msg := fmt.Sprintf("the result (about %d bytes) does not fit in the answer to this HTTP request, which may hold %d bytes", size, h.limits.maxAnswer)
	if tr, ok := res.(*sdk.CallToolResult); ok {
		// The call ran and was charged: a tool result, with its credits.
		return &sdk.CallToolResult{IsError: true, Meta: tr.Meta, Content: []sdk.Content{&sdk.TextContent{
			Text: "answer_too_large: " + msg + "; the call ran and was charged. Call the tool alone, or call its API over REST for results this large",
		}}}, nil
	}
	return nil, newRPCError(CodeLimited, "answer_too_large", msg+"; send it alone")
}

// resultOverhead is what the handler counts for a result beyond its contents: the
// JSON-RPC envelope and the credits in _meta.
const resultOverhead = 512

// answerSize estimates the encoded size of a method's result: a tool result by its
// contents, a tool list by the sizes of its tools as encoded when they were
// registered, anything else by encoding it.
func (h *Handler) answerSize(res sdk.Result) int64 {
	n := int64(resultOverhead)
	switch r := res.(type) {
	case *sdk.CallToolResult:
		for _, c := range r.Content {
			if t, ok := c.(*sdk.TextContent); ok {
				n += jsonStringLen(t.Text)
			} else {
				n += encodedLen(c)
			}
		}
		if raw, ok := r.StructuredContent.(json.RawMessage); ok {
			n += int64(len(raw))
		} else if r.StructuredContent != nil {
			n += encodedLen(r.StructuredContent)
		}
	case *sdk.ListToolsResult:
		sizes := *h.toolSizes.Load()
		for _, t := range r.Tools {
			if s, ok := sizes[t.Name]; ok {
				n += s
			} else {
				n += encodedLen(t)
			}
		}
	default:
		n += encodedLen(res)
	}
	return n
}

// encodedLen is the length of v encoded as JSON.
func encodedLen(v any) int64 {
	b, _ := json.Marshal(v)
	return int64(len(b))
}

// jsonStringLen is the length of s encoded as a JSON string by encoding/json, which
// escapes quotes, backslashes, control characters, the characters of HTML (<, >, &),
// U+2028 and U+2029, and writes each byte of invalid UTF-8 as \ufffd. Other encoders
// escape no more.
func jsonStringLen(s string) int64 {
	n := int64(len(s)) + 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				n++
			case c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
				n++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 5
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5
		case r == '\u2028' || r == '\u2029':
			n += 3
		}
		i += size
	}
	return n
}
