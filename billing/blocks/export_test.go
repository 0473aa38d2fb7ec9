package blocks

// Kill stops b as a killed instance stops: its background work ends, and nothing it
// holds is given back or recorded.
func (b *Blocks) Kill() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	<-b.done
}
