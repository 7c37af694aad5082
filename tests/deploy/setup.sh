#!/bin/sh
# Install the npm packages the deploy tests use to validate deploy/k8s against the
# Kubernetes schemas (pinned in package-lock.json; does nothing when node_modules already
# matches it). Called by deploy/bootstrap-debian.sh and by the ctest fixture test deploy.npm.
set -eu
here="$(dirname "$0")"
exec sh "$here/../tools/npm_install.sh" "$here" kubernetes-models
