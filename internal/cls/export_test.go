package cls

import "github.com/mq-hpc/mq/internal/netfs"

// SetBeforeStart makes Run call f before it starts the sites and serves
// anything: a test holds the CLS there to see what a client reaching it
// early gets.
func SetBeforeStart(c *CLS, f func()) { c.beforeStart = f }

// WithFSKind is cfg with kind saying what filesystem a directory is on.
func WithFSKind(cfg Config, kind func(string) (netfs.Kind, error)) Config {
	cfg.fsKind = kind
	return cfg
}
