package flagnames

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestCache: every flag of the app and of its commands answers the same
// Names as before; a hidden boolean keeps its type (bash completion skips
// hidden flags only as a *cli.BoolFlag), a shown one its empty default
// text under DisableDefaultText; a second Cache changes nothing.
func TestCache(t *testing.T) {
	flags := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "q", Aliases: []string{"queue"}},
			&cli.BoolFlag{Name: "b", Aliases: []string{"block"}, DisableDefaultText: true},
			&cli.BoolFlag{Name: "hint", Hidden: true},
			&cli.IntFlag{Name: "n"},
			&cli.Uint64Flag{Name: "u"},
			&cli.Float64Flag{Name: "x"},
			&cli.DurationFlag{Name: "timeout"},
			&cli.GenericFlag{Name: "v", Aliases: []string{"env"}},
			&cli.StringSliceFlag{Name: "p", Aliases: []string{"prereq", "after"}},
		}
	}
	app := &cli.App{Flags: flags(), Commands: []*cli.Command{{Name: "c", Subcommands: []*cli.Command{{Name: "d", Flags: flags()}}}}}
	want := flags()
	for range 2 {
		Cache(app)
		for _, fs := range [][]cli.Flag{app.Flags, app.Commands[0].Subcommands[0].Flags} {
			for i, f := range fs {
				if !slices.Equal(f.Names(), want[i].Names()) {
					t.Errorf("flag %d: names %v, want %v", i, f.Names(), want[i].Names())
				}
				_, plain := f.(*cli.BoolFlag)
				if hidden := i == 2; plain != hidden {
					t.Errorf("flag %v: a *cli.BoolFlag %v", f.Names(), plain)
				}
			}
			if d := fs[1].(cli.DocGenerationFlag).GetDefaultText(); d != "" {
				t.Errorf("-b's default text %q under DisableDefaultText", d)
			}
		}
	}
}
