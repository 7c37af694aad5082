#!/bin/sh
# Sample generations for the model card, from mhla-server through /v1/completions.
# usage: train/samples.sh MODEL_DIR BIN_DIR [PORT]
# Starts mhla-server on MODEL_DIR, prints each request and its response, stops the server.
set -eu
model=$1
bin=$2
port=${3:-18977}
"$bin/mhla-server" --model "$model" --port "$port" --threads 2 --log-level warn &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for i in $(seq 1 50); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.2
done
req() {
  echo "\$ curl -s http://127.0.0.1:8080/v1/completions -H 'Content-Type: application/json' -d '$1'"
  curl -s "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' -d "$1"
  echo
  echo
}
req '{"prompt": "The jury said", "max_tokens": 40, "temperature": 0, "seed": 1}'
req '{"prompt": "The jury said", "max_tokens": 40, "temperature": 0.8, "top_p": 0.95, "seed": 1}'
req '{"prompt": "In the morning, the President", "max_tokens": 40, "temperature": 0.8, "top_p": 0.95, "seed": 2}'
req '{"prompt": "She looked at him and", "max_tokens": 40, "temperature": 0.8, "top_p": 0.95, "seed": 3}'
req '{"prompt": "The results of the experiment", "max_tokens": 40, "temperature": 0.7, "top_p": 0.95, "seed": 4}'
