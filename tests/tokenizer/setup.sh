#!/bin/sh
# Install the npm packages the tokenizer tests compare against (idempotent: does nothing
# when node_modules already matches package-lock.json). Called by deploy/bootstrap-debian.sh.
set -eu
here="$(dirname "$0")"
exec sh "$here/../tools/npm_install.sh" "$here" @huggingface/tokenizers
