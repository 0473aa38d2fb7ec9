package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// barWidth is the number of cells of the progress bar.
const barWidth = 24

// progress follows a batch run: the items done, the credits spent and the items that
// failed. On a terminal it draws them on one line of standard error, redrawn after
// each batch, with a bar when the input's size is known; elsewhere it draws nothing.
// Reports of invalid lines are written on either, one line each.
type progress struct {
	w    io.Writer
	name string // the command's, which starts each line
	tty  bool
	size int64 // the input's length in bytes, or -1 when it is not known

	read    int64 // the bytes of the lines done
	items   int
	credits int64
	errors  int // items that failed, invalid lines included
	invalid int // invalid lines, which were not sent
	drawn   bool
}

// add counts a batch done: items lines (read bytes of the input), of which failed
// failed, that cost credits.
func (p *progress) add(items int, credits int64, failed int, read int64) {
	p.items += items
	p.credits += credits
	p.errors += failed
	p.read += read
	p.draw("")
}

// wait shows that the run waits d before it sends a batch again.
func (p *progress) wait(d time.Duration) {
	if d >= time.Second {
		d = d.Round(time.Second)
	} else {
		d = d.Round(10 * time.Millisecond)
	}
	p.draw(fmt.Sprintf(" (waiting %s to send the batch again)", d))
}

// invalidLine reports a line that was not sent, the first maxReportedLines of them.
func (p *progress) invalidLine(line int, reason string) {
	p.invalid++
	if p.invalid <= maxReportedLines {
		p.note(fmt.Sprintf("line %d was not sent: %s", line, reason))
	}
}

// note writes a line of its own, on a terminal in place of the progress line, which
// the next update draws again.
func (p *progress) note(s string) {
	if p.drawn {
		io.WriteString(p.w, "\r\x1b[K")
	}
	fmt.Fprintf(p.w, "%s: %s\n", p.name, s)
	p.drawn = false
}

// done ends the line of the progress, drawn a last time.
func (p *progress) done() {
	if !p.tty {
		return
	}
	p.draw("")
	io.WriteString(p.w, "\n")
	p.tty = false // nothing more is drawn
}

// draw redraws the line of the progress, with a note after it.
func (p *progress) draw(note string) {
	if !p.tty {
		return
	}
	io.WriteString(p.w, "\r\x1b[K"+p.line()+note)
	p.drawn = true
}

// line is the text of the progress: "[#####...] 20% 200 items, 200 credits, 3 errors".
func (p *progress) line() string {
	counts := fmt.Sprintf("%s, %s, %s", plural(int64(p.items), "item"), plural(p.credits, "credit"), plural(int64(p.errors), "error"))
	if p.size <= 0 {
		return counts
	}
	done := min(p.read, p.size)
	cells := int(done * barWidth / p.size)
	return fmt.Sprintf("[%s%s] %3d%% %s", strings.Repeat("#", cells), strings.Repeat(".", barWidth-cells), done*100/p.size, counts)
}

// plural writes n with its noun: "1 item", "2 items".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
