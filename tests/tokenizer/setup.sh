#!/bin/sh
# Install the npm packages the tokenizer tests compare against (idempotent: does nothing
# when node_modules already matches package-lock.json). Called by deploy/bootstrap-debian.sh.
set -eu
cd "$(dirname "$0")"
stamp=node_modules/.mhla-installed
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && [ -d node_modules/@huggingface/tokenizers ]; then
  exit 0
fi
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
else
  npm install --no-audit --no-fund --loglevel=error
fi
touch "$stamp"
