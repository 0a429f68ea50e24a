// Package netfs tells whether a directory is on a network filesystem,
// where SQLite's WAL mode is not safe: it needs shared memory (the -shm
// file, mapped) and POSIX locks that work, which NFS, SMB and the
// cluster filesystems give only partly or not at all, and a database
// opened there from two hosts, or with a lock that silently does not
// hold, can corrupt.
package netfs

// Kind is a filesystem's statfs f_type (linux/magic.h), as unsigned 32
// bits: the field's width differs between architectures.
type Kind uint32

// network names the filesystems the check refuses, by f_type.
var network = map[Kind]string{
	0x6969:     "NFS",
	0x517B:     "SMB",
	0xFF534D42: "CIFS",
	0xFE534D42: "SMB2",
	0x0BD00BD0: "Lustre",
	0x47504653: "GPFS",
	0x19830326: "BeeGFS",
	0x00C36400: "CephFS",
	0xAAD7AAEA: "PanFS",
	0x20030528: "OrangeFS",
	0x5346414F: "AFS",
	0x6B414653: "AFS",
	0x73757245: "Coda",
	0x564C:     "NCP",
	0x01021997: "9P",
	0x01161970: "GFS2",
	0x7461636F: "OCFS2",
	// FUSE serves sshfs, GlusterFS, s3fs and the like; a local FUSE
	// filesystem is refused too (the override is for it).
	0x65735546: "FUSE (sshfs or another user-space filesystem)",
}

// Network returns the name of the network filesystem of kind k, or ""
// for a local filesystem or one it does not know.
func Network(k Kind) string { return network[k] }

// On returns the name of the network filesystem dir is on ("" if none),
// asking kind (nil: the system's statfs) for its filesystem.
func On(dir string, kind func(dir string) (Kind, error)) (string, error) {
	if kind == nil {
		kind = Of
	}
	k, err := kind(dir)
	if err != nil {
		return "", err
	}
	return Network(k), nil
}
