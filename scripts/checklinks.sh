#!/usr/bin/env bash
# Checks that every relative link in the repository's Markdown files
# resolves: the file or directory exists and, for a link to a heading
# (file.md#heading), that heading is in the file (GitHub's anchors:
# lower case, punctuation but - and _ dropped, spaces to -). Links out
# (http:, https:, mailto:) are not fetched. Exit 1 naming each broken link.
#
# Usage: scripts/checklinks.sh [FILE.md...]   (default: every tracked *.md)
# cmd/internal/clscmd's TestDocLinks runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

anchors() { # the anchors of a Markdown file's headings, one a line
	awk '/^```/ { fence = !fence; next } !fence && /^#+ / { sub(/^#+ /, ""); print }' "$1" |
		tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

if [ $# -eq 0 ]; then
	if git rev-parse --git-dir >/dev/null 2>&1; then
		mapfile -t files < <(git ls-files '*.md')
	else # a tree without its history (a release tarball)
		mapfile -t files < <(find . -name '*.md' -not -path './.git/*' | sed 's|^\./||')
	fi
else
	files=("$@")
fi
bad=0
for f in "${files[@]}"; do
	dir=$(dirname "$f")
	# Link targets outside code: ](target) with no space in target.
	while IFS= read -r target; do
		case "$target" in
		http:* | https:* | mailto:*) continue ;;
		esac
		path=${target%%#*}
		frag=
		[ "$path" != "$target" ] && frag=${target#*#}
		if [ -z "$path" ]; then
			file=$f
		else
			file=$dir/$path
		fi
		if [ ! -e "$file" ]; then
			echo "$f: $target: no such file" >&2
			bad=1
			continue
		fi
		if [ -n "$frag" ] && [ -f "$file" ] && ! anchors "$file" | grep -qxF -- "$frag"; then
			echo "$f: $target: no such heading" >&2
			bad=1
		fi
	done < <(awk '/^```/ { fence = !fence; next } !fence' "$f" | sed 's/`[^`]*`//g' | grep -o '\](\([^) ]*\))' | sed -e 's/^](//' -e 's/)$//')
done
exit $bad
