// Package login is how the CLS reaches a cluster's login host: with its
// own SSH client (SSH: one connection, the host key checked in
// known_hosts, keys, certificates and the agent offered, through a jump
// host if asked) or with the system's ssh (OpenSSH: the user's ssh config
// applied whole, riding on a master connection where the login host asks
// for a second factor). Both are a Runner: commands run through /bin/sh
// and are killed there when the CLS gives up on them, and files go over
// SFTP, written only when changed and checked before they are renamed
// into place.
package login
