package cli

import (
	"flag"

	"github.com/urfave/cli/v2"
)

// urfave/cli v2 adds the same two *BoolFlag values, HelpFlag and
// VersionFlag, to every App, and BoolFlag.Apply writes to its flag. The
// CLS runs an App for each SSH session at once (clscmd's key endpoint),
// so those writes raced. Fixed upstream in v3 only; until then each App
// applies a copy.
func init() {
	cli.HelpFlag = &sharedBool{BoolFlag: *cli.HelpFlag.(*cli.BoolFlag)}
	cli.VersionFlag = &sharedBool{BoolFlag: *cli.VersionFlag.(*cli.BoolFlag)}
}

// sharedBool is a BoolFlag that many Apps share: Apply writes nothing to it.
type sharedBool struct{ cli.BoolFlag }

// Apply defines the flag in set from a copy.
func (f *sharedBool) Apply(set *flag.FlagSet) error {
	c := f.BoolFlag
	return c.Apply(set)
}

// GetDefaultText is empty, as for the BoolFlag it wraps (DisableDefaultText,
// which help only honours on a *cli.BoolFlag).
func (f *sharedBool) GetDefaultText() string { return "" }
