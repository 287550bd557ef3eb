#!/usr/bin/env bash
# Installs Debian's headless Chromium, used by the HTML report test. Needs root (as on CI).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
