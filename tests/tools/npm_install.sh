#!/bin/sh
# Install the npm packages of one test folder from its package-lock.json, idempotently:
# does nothing when node_modules already matches the lock file and holds the package that
# the folder's tests import. Used by tests/*/setup.sh.
# Usage: npm_install.sh DIR PACKAGE
set -eu
cd "$1"
stamp=node_modules/.mhla-installed
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && [ -d "node_modules/$2" ]; then
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
touch "$stamp"
