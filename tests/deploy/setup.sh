#!/bin/sh
# Install the npm packages the deploy tests use to validate deploy/k8s against the
# Kubernetes schemas (pinned in package-lock.json; does nothing when node_modules already
# matches it). Called by deploy/bootstrap-debian.sh and by the ctest fixture test deploy.npm.
set -eu
cd "$(dirname "$0")"
stamp=node_modules/.mhla-installed
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && [ -d node_modules/kubernetes-models ]; then
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
touch "$stamp"
