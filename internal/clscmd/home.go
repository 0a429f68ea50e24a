package clscmd

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/mqhome"
	"github.com/mq-hpc/mq/sshserver"
)

// homeEntries are what a CLS keeps in MQ_HOME besides the database (which
// metaqueue checks), with the type each must be.
var homeEntries = map[string]fs.FileMode{
	"cls.log": 0, "cls.lock": 0, "cls.sock": fs.ModeSocket,
	sshserver.KeyFileName: 0, sshserver.KeyFileName + ".lock": 0,
	sshserver.HostKeyFileName: 0, sshserver.HostKeyFileName + ".pub": 0,
	"output": fs.ModeDir, "sites": fs.ModeDir,
}

// openHome returns $MQ_HOME's real path, made (mode 0700) if missing,
// after checking that no one else can write it or anything in it
// (mqhome). warning is set when others can read it.
func openHome() (home, warning string, err error) {
	home, err = client.Home()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", "", fmt.Errorf("cannot create MQ_HOME: %w", err)
	}
	if home, warning, err = mqhome.Check(home); err != nil {
		return "", "", err
	}
	for name, typ := range homeEntries {
		if err := mqhome.CheckEntry(filepath.Join(home, name), typ); err != nil {
			return "", "", err
		}
	}
	return home, warning, nil
}
