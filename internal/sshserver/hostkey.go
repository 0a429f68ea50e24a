package sshserver

import (
	"errors"
	"os"

	"golang.org/x/crypto/ssh"

	"github.com/mq-hpc/mq/internal/sshkey"
)

// HostKeyFileName is the CLS's SSH host key in $MQ_HOME (ed25519, OpenSSH
// format, mode 0600); its public half is beside it with ".pub".
const HostKeyFileName = "ssh_host_ed25519_key"

// LoadOrCreateHostKey reads the host key at path, creating it on first use.
// The key is made once and kept: clients pin it.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	signer, err := sshkey.LoadSigner(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return signer, err
	}
	if _, err := sshkey.NewKeyPair(path, "mq-cls"); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return sshkey.LoadSigner(path)
}
