#!/bin/sh
# Install the npm package the playground's browser test drives Chromium with (idempotent:
# does nothing when node_modules already matches package-lock.json). Called by
# deploy/bootstrap-debian.sh and by the ctest fixture webui_npm. The browser itself is
# Debian's chromium (the bootstrap installs it); playwright-core downloads none.
set -eu
here="$(dirname "$0")"
exec sh "$here/../tools/npm_install.sh" "$here" playwright-core
