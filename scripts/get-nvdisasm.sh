#!/usr/bin/env bash
# Puts CUDA 11.8's nvdisasm (Debian bookworm non-free, nvidia-cuda-toolkit) in
# /usr/local/bin for scripts/sass.py on a host whose CUDA toolkit lacks one. A
# developer's tool: the build and the tests do not need it.
set -euo pipefail
command -v nvdisasm >/dev/null && { echo "nvdisasm: $(command -v nvdisasm)"; exit 0; }
src=/etc/apt/sources.list.d/tile-nonfree.sources
if ! apt-cache policy nvidia-cuda-toolkit 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
    apt-get update -qq
fi
tmp=$(mktemp -d)
chmod 755 "$tmp"   # apt-get download runs as _apt
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb x)
install -m 755 "$tmp/x/usr/bin/nvdisasm" /usr/local/bin/nvdisasm
echo "nvdisasm: /usr/local/bin/nvdisasm ($(/usr/local/bin/nvdisasm --version | tail -1))"
