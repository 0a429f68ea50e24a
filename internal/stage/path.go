package stage

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrPath is wrapped by every refusal of a path: not absolute, empty, with
// NUL or a ".." element, or leading through a symbolic link out of a place's
// root.
var ErrPath = errors.New("path refused")

// Rooted is the one path rule of staging: it maps the logical path p (the
// file's absolute path on the CLS host) into root. p must be absolute,
// non-empty, free of NUL and of any ".." element (even one that cleaning
// would absorb: such a path is a mistake or an attack, never a name a job
// declared), and must name something below "/". The result is
// root + path.Clean(p); a root of "" or "/" is the identity.
//
// Rooted is lexical only; each Place also refuses symbolic links that lead
// out of its root (see Dir and SFTP).
func Rooted(root, p string) (string, error) {
	rel, err := relative(p)
	if err != nil {
		return "", err
	}
	if strings.IndexByte(root, 0) >= 0 {
		return "", fmt.Errorf("%w: root %q holds NUL", ErrPath, root)
	}
	if root == "" || root == "/" {
		return "/" + rel, nil
	}
	r := path.Clean(root)
	if r == "/" {
		return "/" + rel, nil
	}
	if hasDotDot(r) {
		return "", fmt.Errorf("%w: root %q holds ..", ErrPath, root)
	}
	return r + "/" + rel, nil
}

// relative checks p and returns it cleaned, without its leading slash.
func relative(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty path", ErrPath)
	case strings.IndexByte(p, 0) >= 0:
		return "", fmt.Errorf("%w: %q holds NUL", ErrPath, p)
	case p[0] != '/':
		return "", fmt.Errorf("%w: %q is not absolute", ErrPath, p)
	case hasDotDot(p):
		return "", fmt.Errorf("%w: %q holds ..", ErrPath, p)
	}
	c := path.Clean(p)
	if c == "/" {
		return "", fmt.Errorf("%w: %q names no file", ErrPath, p)
	}
	return c[1:], nil
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}
