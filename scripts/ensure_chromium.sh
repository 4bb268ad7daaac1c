#!/usr/bin/env bash
# Make sure a headless Chromium is available for tests/test_book_html.py.
# Uses Debian's `chromium` package (apt-get, as root or via sudo) only when no browser is found.
set -euo pipefail
for b in chromium chromium-browser google-chrome google-chrome-stable; do
  if command -v "$b" >/dev/null 2>&1; then
    echo "browser: $(command -v "$b")"
    exit 0
  fi
done
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "browser: none found, installing Debian's chromium with apt-get"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium
