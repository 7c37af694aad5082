#!/bin/sh
# Install the npm package the OpenAPI document's validation uses (idempotent: does nothing
# when node_modules already matches package-lock.json). Called by deploy/bootstrap-debian.sh
# and by the ctest fixture server_openapi_npm.
set -eu
here="$(dirname "$0")"
exec sh "$here/../tools/npm_install.sh" "$here" @apidevtools/swagger-parser
