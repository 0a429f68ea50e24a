package login

import "testing"

// The hint for a host not in known_hosts is a command that runs as
// written: the host's own port and name, quoted for the shell.
func TestKeyscan(t *testing.T) {
	for _, tc := range []struct{ hostname, want string }{
		{"login.example.org:22", "ssh-keyscan login.example.org"},
		{"127.0.0.1:2222", "ssh-keyscan -p 2222 127.0.0.1"},
		{"[::1]:2222", "ssh-keyscan -p 2222 ::1"},
		{"odd host;rm:22", "ssh-keyscan 'odd host;rm'"},
		{"noport", "ssh-keyscan noport"},
	} {
		if got := keyscan(tc.hostname); got != tc.want {
			t.Errorf("keyscan(%q) = %q, want %q", tc.hostname, got, tc.want)
		}
	}
}
