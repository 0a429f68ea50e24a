package catalog

import (
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
)

// TestImports keeps the catalog a module: it imports the standard
// library, the public job and protocol packages and the internal leaf
// packages, never the metaqueue's core nor another module of it.
func TestImports(t *testing.T) { modtest.Imports(t) }
