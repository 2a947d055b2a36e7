#!/usr/bin/env bash
# Installs the Debian packages named that are missing; nothing when all are there. `apt-get update`
# runs before the first install in this clone (its stamp is .build-deps/apt-updated), and again only
# if an install then fails on stale package lists.
set -euo pipefail
sudo=$([ "$(id -u)" = 0 ] || echo sudo)
missing=()
for package in "$@"; do dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package"); done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "installing: ${missing[*]}"
stamp=.build-deps/apt-updated
update() { $sudo apt-get update -qq && mkdir -p "$(dirname "$stamp")" && touch "$stamp"; }
install() { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"; }
[ -e "$stamp" ] || update
install || { update && install; }
