package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/client"
)

// maxLineBytes bounds one line of a batch's input.
const maxLineBytes = 1 << 20

// maxReportedLines is how many invalid lines a batch run reports one by one on
// standard error; the others are counted.
const maxReportedLines = 10

// The retry policy of a batch run: a batch refused for the rate or the concurrency
// limit is sent again when the service says (a per-minute limit asks for at most a
// minute), and a batch whose answer was lost is sent again with the same idempotency
// key, which the service runs once.
const (
	batchAttempts = 6
	batchMaxDelay = 90 * time.Second
)

// A lineItem is one non-blank line of a batch's input.
type lineItem struct {
	line   int            // its number in the input, from 1
	params map[string]any // the parameters; nil when the line is invalid
	// invalid is the error envelope written for an invalid line, which is not sent,
	// and reason says what is wrong with it.
	invalid []byte
	reason  string
	bytes   int64 // the line's length in the input, its end of line included
}

// batch calls the API id once per line of the JSON Lines file at path ("-" for
// standard input), in batches of the plan's size, and writes one result line per item
// to standard output, in order. See the package documentation for the exit status.
func (c *cli) batch(ctx context.Context, id, path string) int {
	in, size, closeInput, err := c.openInput(path)
	if err != nil {
		return c.usageError("%v", err)
	}
	defer closeInput()
	p := &progress{w: c.stderr, name: c.brand.Command, tty: c.stderrIsTerminal, size: size}
	sleep := c.sleep
	if sleep == nil {
		sleep = client.Sleep
	}
	c.opts.Retry = &client.RetryPolicy{MaxAttempts: batchAttempts, MaxDelay: batchMaxDelay,
		Sleep: func(ctx context.Context, d time.Duration) error {
			p.wait(d)
			return sleep(ctx, d)
		}}
	cl, api, code := c.connect(ctx, id)
	if cl == nil {
		return code
	}
	maxItems, err := cl.BatchMaxItems(ctx)
	if err != nil {
		return c.failure(fmt.Errorf("reading the plan's batch size (GET /v1/analytics): %s", describe(err, c.brand.KeyVar())))
	}

	r := &itemReader{sc: bufio.NewScanner(in), api: api, cl: cl}
	r.sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	stop := func(format string, args ...any) int {
		p.done()
		fmt.Fprintf(c.stderr, c.brand.Command+": "+format+"\n", args...)
		return exitAPI
	}
	run := &batchRun{cl: cl, api: api, out: c.stdout, p: p, keys: true, keyVar: c.brand.KeyVar()}
	for {
		chunk, readErr := r.next(ctx, maxItems)
		if len(chunk) > 0 {
			if err := run.chunk(ctx, chunk); err != nil {
				first := chunk[0].line
				return stop("stopped at line %d: %v\n%s: standard output has the results of the lines before it; to go on, run the lines from %d on (tail -n +%d FILE)", first, err, c.brand.Command, first, first)
			}
		}
		if readErr == io.EOF {
			break
		}
		if readErr != nil {
			return stop("reading %s: %v; standard output has the results of the lines before it", inputName(path), readErr)
		}
	}
	p.read = p.size // all of it, blank lines and line ends included
	p.done()
	if p.invalid > maxReportedLines {
		fmt.Fprintf(c.stderr, "%s: %d invalid lines in all were not sent; their result lines say why\n", c.brand.Command, p.invalid)
	}
	if p.errors > 0 {
		return exitAPI
	}
	return exitOK
}

// A batchRun sends the batches of a run.
type batchRun struct {
	cl  *client.Client
	api *catalog.API
	out io.Writer // standard output
	p   *progress
	// keys says whether batches carry an idempotency key: until the service says it
	// keeps no answers for them.
	keys bool
	// keyVar is the environment variable of the key, for messages.
	keyVar string
}

// chunk sends the valid items of chunk as one batch and writes the result line of
// every item of chunk, in order. It returns an error, and writes nothing, when the
// batch could not be run.
func (b *batchRun) chunk(ctx context.Context, chunk []lineItem) error {
	var items []map[string]any
	for _, it := range chunk {
		if it.params != nil {
			items = append(items, it.params)
		}
	}
	var resp *client.BatchResponse
	if len(items) > 0 {
		var err error
		resp, err = b.send(ctx, items)
		if err != nil {
			var apiErr *client.APIError
			if errors.As(err, &apiErr) {
				return errors.New("the service refused the batch: " + describe(err, b.keyVar))
			}
			return errors.New(describe(err, b.keyVar))
		}
	}
	return b.write(chunk, resp)
}

// send sends one batch, with a new idempotency key unless the service keeps no answers
// for keys: then the batch, and the ones after it, go without one.
func (b *batchRun) send(ctx context.Context, items []map[string]any) (*client.BatchResponse, error) {
	if !b.keys {
		return b.cl.ExecuteBatch(ctx, b.api.ID, items, nil)
	}
	resp, err := b.cl.ExecuteBatch(ctx, b.api.ID, items, &client.BatchOptions{IdempotencyKey: rand.Text()})
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(apiErr.Message), "idempotency") {
		b.keys = false
		b.p.note("the service keeps no answers for idempotency keys (" + apiErr.Message + "): batches go without one, and one whose answer is lost is not sent again")
		return b.cl.ExecuteBatch(ctx, b.api.ID, items, nil)
	}
	return resp, err
}

// write writes the result line of every item of chunk, in order: an invalid line's
// own, or the answer's next item.
func (b *batchRun) write(chunk []lineItem, resp *client.BatchResponse) error {
	var lines bytes.Buffer
	next, failed := 0, 0
	for _, it := range chunk {
		if it.invalid != nil {
			lines.Write(it.invalid)
			failed++
		} else {
			item := resp.Items[next]
			next++
			if err := json.Compact(&lines, item.Envelope); err != nil {
				return fmt.Errorf("the answer of item %d is not JSON: %w", next-1, err)
			}
			if item.Err != nil {
				failed++
			}
		}
		lines.WriteByte('\n')
	}
	for _, it := range chunk {
		if it.invalid != nil {
			b.p.invalidLine(it.line, it.reason)
		}
	}
	if _, err := b.out.Write(lines.Bytes()); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	var credits int64
	if resp != nil {
		credits = resp.Summary.Credits
	}
	var read int64
	for _, it := range chunk {
		read += it.bytes
	}
	b.p.add(len(chunk), credits, failed, read)
	return nil
}

// describe says what went wrong with a request of a batch run: the status, the code
// and the message of a refusal, or the error.
func describe(err error, keyVar string) string {
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		return strings.TrimPrefix(err.Error(), "client: ")
	}
	msg := fmt.Sprintf("%d", apiErr.StatusCode)
	if apiErr.Code != "" {
		msg += " (" + apiErr.Code + ")"
	}
	msg += ": " + apiErr.Message
	if apiErr.StatusCode == http.StatusUnauthorized {
		msg += fmt.Sprintf("; the key in %s is not a key of this service", keyVar)
	}
	return msg
}

// openInput opens the input of a batch: the file at path, or standard input for "-".
// size is the input's length when it is a regular file, else -1.
func (c *cli) openInput(path string) (in io.Reader, size int64, closeInput func(), err error) {
	in, closeInput = c.stdin, func() {}
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("--batch: %w", err)
		}
		in, closeInput = f, func() { f.Close() }
	}
	size = -1
	if f, ok := in.(*os.File); ok {
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			size = info.Size()
		} else if err == nil && info.IsDir() {
			closeInput()
			return nil, 0, nil, fmt.Errorf("--batch: %s is a directory", path)
		}
	}
	return in, size, closeInput, nil
}

func inputName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// itemReader reads the items of a batch's input, one per non-blank line.
type itemReader struct {
	sc   *bufio.Scanner
	api  *catalog.API
	cl   *client.Client
	line int
}

// next returns the next lines of the input, up to n valid items (and the invalid lines
// among them), with io.EOF at the end of the input or the error of reading it.
func (r *itemReader) next(ctx context.Context, n int) ([]lineItem, error) {
	var chunk []lineItem
	valid := 0
	for valid < n {
		if !r.sc.Scan() {
			err := r.sc.Err()
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("line %d is longer than %d bytes", r.line+1, maxLineBytes)
			}
			if err == nil {
				err = io.EOF
			}
			return chunk, err
		}
		r.line++
		raw := r.sc.Bytes()
		it := lineItem{line: r.line, bytes: int64(len(raw)) + 1}
		if len(bytes.TrimSpace(raw)) == 0 {
			if len(chunk) > 0 {
				chunk[len(chunk)-1].bytes += it.bytes
			}
			continue
		}
		params, err := parseItem(raw)
		if err == nil {
			err = r.cl.ValidateBatchItem(ctx, r.api.ID, params)
		}
		if err != nil {
			it.invalid, it.reason = invalidEnvelope(err)
		} else {
			it.params = params
			valid++
		}
		chunk = append(chunk, it)
	}
	return chunk, nil
}

// parseItem reads a line as one JSON object of parameters, numbers kept exact.
func parseItem(line []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the line is not JSON (%v); give each item's parameters as a JSON object, such as {\"text\": \"hello\"}", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("the line holds more than one JSON value; give one JSON object of parameters per line")
	}
	params, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the line is not a JSON object; give each item's parameters as a JSON object, such as {\"text\": \"hello\"}")
	}
	return params, nil
}

// invalidEnvelope returns the result line of an invalid line, the error envelope of
// an item the service would have refused (code invalid_input, not charged), and its
// message.
func invalidEnvelope(err error) ([]byte, string) {
	msg := err.Error()
	var ve *client.ValidationError
	if errors.As(err, &ve) {
		msg = ve.Reason
		if ve.Param != "" {
			msg = fmt.Sprintf("parameter %q: %s", ve.Param, ve.Reason)
		}
	}
	b, _ := json.Marshal(struct {
		Status  string  `json:"status"`
		Error   string  `json:"error"`
		Data    *string `json:"data"`
		Code    string  `json:"code"`
		Credits int     `json:"credits"`
	}{"error", msg, nil, "invalid_input", 0})
	return b, msg
}
