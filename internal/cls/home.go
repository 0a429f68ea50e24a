package cls

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/internal/netfs"
	"github.com/mq-hpc/mq/internal/sshserver"
)

// homeEntries are what a CLS keeps in MQ_HOME besides the database (which
// metaqueue checks), with the type each must be.
var homeEntries = map[string]fs.FileMode{
	"cls.log": 0, "cls.log.1": 0, "cls.lock": 0, "cls.sock": fs.ModeSocket,
	sshserver.KeyFileName: 0, sshserver.KeyFileName + ".lock": 0,
	sshserver.HostKeyFileName: 0, sshserver.HostKeyFileName + ".pub": 0,
	"output": fs.ModeDir, "sites": fs.ModeDir, "reserve": 0,
	TokenFileName: 0, URLFileName: 0,
}

// OpenHome returns the real path of an MQ_HOME, made (mode 0700) if
// missing, after checking that no one else can write it or anything in
// it (mqhome). warning is set when others can read it. The cls command's
// verbs that touch the home without a CLS (cls key) use it too.
func OpenHome(path string) (home, warning string, err error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return "", "", fmt.Errorf("cannot create MQ_HOME: %w", err)
	}
	if home, warning, err = mqhome.Check(path); err != nil {
		return "", "", err
	}
	for name, typ := range homeEntries {
		if err := mqhome.CheckEntry(filepath.Join(home, name), typ); err != nil {
			return "", "", err
		}
	}
	return home, warning, nil
}

// checkLocalHome refuses a home on a network filesystem (netfs), unless
// allow: the database's WAL mode needs shared memory and locks that work,
// and there it can be corrupted. It returns the filesystem's name when it
// is one, allowed.
func checkLocalHome(home string, kind func(string) (netfs.Kind, error), allow bool) (string, error) {
	name, err := netfs.On(home, kind)
	if err != nil {
		return "", fmt.Errorf("MQ_HOME: %w", err)
	}
	if name != "" && !allow {
		return "", fmt.Errorf("MQ_HOME %s is on %s, a network filesystem, where the metaqueue's database (SQLite in WAL mode) can be corrupted: set MQ_HOME to a directory on a disk of this host, for cls serve and the commands alike (export MQ_HOME=/var/tmp/$USER/mq, say), or pass --allow-network-fs to serve there all the same", home, name)
	}
	return name, nil
}

// joinWarnings joins two warnings for one line, either may be "".
func joinWarnings(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}
