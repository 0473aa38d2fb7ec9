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

// Accounts returns the number of accounts b keeps a record of.
func (b *Blocks) Accounts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.accounts)
}
