package cli

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// nameList collects -p's values as given. A StringSliceFlag copies them
// to its aliases through JSON, which makes bytes that are not UTF-8
// U+FFFD: such a name then passed the check that refuses it, and the
// job waited for a target no one meant.
type nameList struct{ names []string }

// Serialize is what urfave/cli copies to the flag's aliases.
func (l *nameList) Serialize() string { return aliasCopy }

func (l *nameList) Set(v string) error {
	if v != aliasCopy {
		l.names = append(l.names, v)
	}
	return nil
}

func (l *nameList) String() string { return strings.Join(l.names, ",") }

// prereqFlag is -p's targets.
func prereqFlag(c *cli.Context) []string { return splitList(c.Generic("p").(*nameList).names) }
