#!/usr/bin/env bash
# Builds the placeholder agent (cmd/mqagent) as static binaries for the
# platforms sites commonly have, into DIR (default bin/), named
# mqagent-OS-ARCH: `cls serve --agents DIR` uploads the one matching each
# site's `uname -sm`. (For sites of this host's own platform the CLS can
# also upload its own cls binary.)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-bin}
mkdir -p "$dir"
for p in linux/amd64 linux/arm64 linux/ppc64le; do
	CGO_ENABLED=0 GOOS=${p%/*} GOARCH=${p#*/} go build -trimpath -ldflags=-s -o "$dir/mqagent-${p%/*}-${p#*/}" ./cmd/mqagent
	echo "$dir/mqagent-${p%/*}-${p#*/}"
done
