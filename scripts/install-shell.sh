#!/usr/bin/env bash
# Installs man pages and bash, zsh and fish completion for mq's commands
# (mqsub, mqstat, mqdel, mqhold, mqrls, mqalter, mqwait, cls, mqsim), generated from their flag
# definitions by `cls docs` (cls from PATH, else built from this tree).
#
# Usage: scripts/install-shell.sh            (for you: under ~/.local and ~/.config)
#        PREFIX=/usr/local scripts/install-shell.sh   (system-wide, as root)
# Then: bash picks completion up in new shells (bash-completion's user
# directory); zsh needs the printed directory in $fpath before compinit;
# fish needs nothing more; man finds ~/.local/share/man only while
# ~/.local/bin is on PATH (man-db derives its path from PATH), else the
# script prints the MANPATH line to add.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if command -v cls >/dev/null 2>&1 && cls docs "$tmp/docs" 2>/dev/null; then
	:
else
	go build -o "$tmp/cls" ./cmd/cls
	"$tmp/cls" docs "$tmp/docs"
fi

if [ -n "${PREFIX:-}" ]; then
	man=$PREFIX/share/man/man1
	bash=$PREFIX/share/bash-completion/completions
	zsh=$PREFIX/share/zsh/site-functions
	fish=$PREFIX/share/fish/vendor_completions.d
else
	data=${XDG_DATA_HOME:-$HOME/.local/share}
	man=$data/man/man1
	bash=$data/bash-completion/completions
	zsh=$data/zsh/site-functions
	fish=${XDG_CONFIG_HOME:-$HOME/.config}/fish/completions
fi
mkdir -p "$man" "$bash" "$zsh" "$fish"
install -m 0644 "$tmp"/docs/man1/*.1 "$man/"
install -m 0644 "$tmp"/docs/bash/* "$bash/"
install -m 0644 "$tmp"/docs/zsh/_* "$zsh/"
install -m 0644 "$tmp"/docs/fish/*.fish "$fish/"
echo "installed: man pages in $man; completion for bash in $bash, zsh in $zsh, fish in $fish"
case "${PREFIX:-}" in
"") echo "zsh: add 'fpath=($zsh \$fpath)' before compinit in ~/.zshrc if it is not there" ;;
esac
if command -v man >/dev/null 2>&1 && [ "$(man -w mqsub 2>/dev/null)" != "$man/mqsub.1" ]; then
	# The trailing colon keeps man's own path after it.
	echo "man: add 'export MANPATH=${man%/man1}:' to ~/.profile (man does not look in ${man%/man1} now)"
fi
