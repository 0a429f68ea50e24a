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

// Flags whose Names are made once. urfave/cli v2's Names strips each name
// with a regular expression at every call, and at every run it asks IsSet
// of every name, each looked up through the Names of the flags before it:
// over mqsub's 71 flags that was a third of mqsub's CPU (about 3 ms a
// run, felt by a script that submits in a loop).
type (
	stringFlag struct {
		*cli.StringFlag
		names []string
	}
	boolFlag struct {
		*cli.BoolFlag
		names []string
	}
	intFlag struct {
		*cli.IntFlag
		names []string
	}
	uint64Flag struct {
		*cli.Uint64Flag
		names []string
	}
	float64Flag struct {
		*cli.Float64Flag
		names []string
	}
	durationFlag struct {
		*cli.DurationFlag
		names []string
	}
	genericFlag struct {
		*cli.GenericFlag
		names []string
	}
	stringSliceFlag struct {
		*cli.StringSliceFlag
		names []string
	}
)

func (f *stringFlag) Names() []string      { return f.names }
func (f *boolFlag) Names() []string        { return f.names }
func (f *intFlag) Names() []string         { return f.names }
func (f *uint64Flag) Names() []string      { return f.names }
func (f *float64Flag) Names() []string     { return f.names }
func (f *durationFlag) Names() []string    { return f.names }
func (f *genericFlag) Names() []string     { return f.names }
func (f *stringSliceFlag) Names() []string { return f.names }

// GetDefaultText honours DisableDefaultText, which help honours only on a
// *cli.BoolFlag.
func (f *boolFlag) GetDefaultText() string {
	if f.DisableDefaultText {
		return ""
	}
	return f.BoolFlag.GetDefaultText()
}

// namedOnceAll wraps the flags of app and of all its commands (namedOnce).
// Run does, and not Tidy: the fish completion `cls docs` writes, and bash
// completion's list of flags, tell flags apart by their concrete types.
func namedOnceAll(app *cli.App) {
	app.Flags = namedOnce(app.Flags)
	var walk func([]*cli.Command)
	walk = func(cs []*cli.Command) {
		for _, c := range cs {
			c.Flags = namedOnce(c.Flags)
			walk(c.Subcommands)
		}
	}
	walk(app.Commands)
}

// namedOnce is fs with each flag of the types above wrapped so that its
// Names is made once; others, hidden booleans (which bash completion skips
// only as a *cli.BoolFlag) and flags wrapped already are as they were.
func namedOnce(fs []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(fs))
	for i, f := range fs {
		n := f.Names()
		switch f := f.(type) {
		case *cli.StringFlag:
			out[i] = &stringFlag{f, n}
		case *cli.BoolFlag:
			out[i] = f
			if !f.Hidden {
				out[i] = &boolFlag{f, n}
			}
		case *cli.IntFlag:
			out[i] = &intFlag{f, n}
		case *cli.Uint64Flag:
			out[i] = &uint64Flag{f, n}
		case *cli.Float64Flag:
			out[i] = &float64Flag{f, n}
		case *cli.DurationFlag:
			out[i] = &durationFlag{f, n}
		case *cli.GenericFlag:
			out[i] = &genericFlag{f, n}
		case *cli.StringSliceFlag:
			out[i] = &stringSliceFlag{f, n}
		default:
			out[i] = f
		}
	}
	return out
}
