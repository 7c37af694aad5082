#!/bin/sh
# Install the npm packages the server's client tests use (idempotent: does nothing when
# node_modules already matches package-lock.json). Called by deploy/bootstrap-debian.sh
# and by the ctest fixture server_npm.
set -eu
cd "$(dirname "$0")"
stamp=node_modules/.mhla-installed
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && [ -d node_modules/openai ]; then
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
touch "$stamp"
