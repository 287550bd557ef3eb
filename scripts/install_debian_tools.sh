#!/usr/bin/env bash
# Debian packages the tests use: headless Chromium (the HTML audit report test) and docker-compose (the
# compose file check). Installs only what is missing. Needs root, as on CI.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
[ ${#missing[@]} -eq 0 ] && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
