package sshkey

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
)

// certFile is the rule for a certificate file: public, as a .pub is
// (ssh-keygen -s writes it 0644), but one that another user could
// replace could swap it for another certificate of the key's (a more
// restricted one, or an expired one) or for garbage, and so choose what
// the login host is shown, or that nothing is.
var certFile = Trust{What: "certificate", Risk: "put another certificate in it"}

// CertFile is where the certificate of the private key at keyPath is
// read from: keyPath+"-cert.pub", OpenSSH's default CertificateFile.
func CertFile(keyPath string) string { return keyPath + "-cert.pub" }

// LoadCertSigner returns a signer that offers the user certificate in
// CertFile(keyPath) with key, the private key read from keyPath. With no
// such file its error matches fs.ErrNotExist. A file another user could
// change (OpenTrusted's rule for a key to trust), one that holds no
// certificate, a host's, one for another key, or one expired at now, is
// refused, the error one line naming the file and why: a login host
// refuses such a certificate anyway, and the refusal alone says nothing
// of why.
func LoadCertSigner(keyPath string, key ssh.Signer, now time.Time) (ssh.Signer, error) {
	return loadCertSigner(keyPath, key, now, os.Geteuid())
}

func loadCertSigner(keyPath string, key ssh.Signer, now time.Time, euid int) (ssh.Signer, error) {
	path := CertFile(keyPath)
	data, err := readTrusted(path, certFile, euid)
	if err != nil {
		return nil, err
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey(data)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", path, err)
	}
	cert, ok := pk.(*ssh.Certificate)
	switch {
	case !ok:
		return nil, fmt.Errorf("certificate %s holds a plain %s key, not a certificate", path, pk.Type())
	case cert.CertType != ssh.UserCert:
		return nil, fmt.Errorf("certificate %s is a host certificate, not a user certificate", path)
	case !bytes.Equal(cert.Key.Marshal(), key.PublicKey().Marshal()):
		return nil, fmt.Errorf("certificate %s is for another key (%s), not %s's (%s)",
			path, ssh.FingerprintSHA256(cert.Key), keyPath, ssh.FingerprintSHA256(key.PublicKey()))
	case cert.ValidBefore != ssh.CertTimeInfinity && uint64(now.Unix()) >= cert.ValidBefore:
		// ValidBefore is below now, so within int64.
		at := time.Unix(int64(cert.ValidBefore), 0).UTC().Format(time.RFC3339)
		return nil, fmt.Errorf("certificate %s expired at %s", path, at)
	}
	signer, err := ssh.NewCertSigner(cert, key)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", path, err)
	}
	return signer, nil
}
