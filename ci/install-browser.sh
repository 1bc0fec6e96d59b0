#!/usr/bin/env bash
# Install Debian's headless Chromium and its driver for the documentation browser test.
# Idempotent: does nothing when both are already installed.
set -euo pipefail

packages=(chromium chromium-driver)
missing=()
for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ] && [ -x /usr/bin/chromium ]; then
    echo "install-browser: chromium already installed ($(/usr/bin/chromium --version 2>/dev/null || echo unknown))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-browser: need root (or sudo) to apt-get install ${missing[*]}" >&2
        exit 1
    fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends "${missing[@]:-${packages[@]}}" fonts-dejavu-core
/usr/bin/chromium --version || true
