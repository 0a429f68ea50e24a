// Package flagnames makes urfave/cli v2 flags' names once. Its Names
// strips each name with a regular expression at every call, and at every
// run the App asks IsSet of every name, each looked up through the Names
// of the flags before it: the cost grows as the square of the flags, and
// over mqsub's 71 it was a third of mqsub's CPU (about 3 ms a run, felt by
// a script that submits in a loop).
package flagnames

import "github.com/urfave/cli/v2"

// Flags whose Names are made once.
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

// Cache wraps the flags of app and of all its commands so that their
// Names are made once. Call it on an App about to run, not on one whose
// docs are written: the fish completion `cls docs` writes tells a file
// flag by its concrete type.
func Cache(app *cli.App) {
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

// Unwrap is the urfave/cli flag that f wraps (f itself if it wraps
// none): a type switch over a cached App's flags must see the flag's own
// type.
func Unwrap(f cli.Flag) cli.Flag {
	switch f := f.(type) {
	case *stringFlag:
		return f.StringFlag
	case *boolFlag:
		return f.BoolFlag
	case *intFlag:
		return f.IntFlag
	case *uint64Flag:
		return f.Uint64Flag
	case *float64Flag:
		return f.Float64Flag
	case *durationFlag:
		return f.DurationFlag
	case *genericFlag:
		return f.GenericFlag
	case *stringSliceFlag:
		return f.StringSliceFlag
	}
	return f
}
