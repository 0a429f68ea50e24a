package cls

// SetBeforeStart makes Run call f before it starts the sites and serves
// anything: a test holds the CLS there to see what a client reaching it
// early gets.
func SetBeforeStart(c *CLS, f func()) { c.beforeStart = f }
