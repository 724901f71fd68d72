#!/usr/bin/env bash
# Installs code-server (VS Code's own server and web workbench) from the npm registry into a cache
# folder outside the repository, and prints its binary's path. Idempotent: a second run only checks.
#
#   bash setup-code-server.sh [PREFIX]     (default: $XDG_CACHE_HOME or ~/.cache, context-assembly/)
#
# 4.100.3 is the newest code-server whose engines.node is 20 (VS Code 1.100.3). Its native modules
# compile here (their prebuilt downloads come from outside the registries): Debian's build tools
# and headers must be there (.ci/run installs them). @vscode/ripgrep would download its binary
# from GitHub: Debian's ripgrep is put where it looks first.
set -euo pipefail
VERSION=4.100.3
RIPGREP_PKG=1.15.11  # @vscode/ripgrep in code-server 4.100.3's lib/vscode/npm-shrinkwrap.json
RIPGREP_ASSET=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz
PREFIX="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/context-assembly/code-server-$VERSION}"
CS="$PREFIX/node_modules/.bin/code-server"
export XDG_CONFIG_HOME="$PREFIX/xdg-config" XDG_DATA_HOME="$PREFIX/xdg-data"  # code-server writes there even for --version

if [ -x "$CS" ] && "$CS" --version 2>/dev/null | grep -q "^$VERSION "; then
  echo "$CS"
  exit 0
fi
missing=()
command -v rg >/dev/null || missing+=(ripgrep)
command -v make >/dev/null && command -v g++ >/dev/null || missing+=(build-essential)
command -v pkg-config >/dev/null || missing+=(pkg-config)
for header in gssapi/gssapi.h X11/Xlib.h X11/extensions/XKBrules.h libsecret-1/libsecret/secret.h; do
  [ -e "/usr/include/$header" ] || missing+=("(the header $header)")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup-code-server.sh: missing ${missing[*]}: apt-get install ripgrep build-essential pkg-config" \
       "libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev" >&2
  exit 2
fi
mkdir -p "$PREFIX/tmp/vscode-ripgrep-cache-$RIPGREP_PKG"
tar czf "$PREFIX/tmp/vscode-ripgrep-cache-$RIPGREP_PKG/$RIPGREP_ASSET" -C "$(dirname "$(command -v rg)")" rg
[ -f "$PREFIX/package.json" ] || echo '{"private": true}' > "$PREFIX/package.json"
# unsafe_perm: as root the postinstall refuses to run otherwise; yes: node-pty's postinstall runs `npx node-gyp`
if ! (cd "$PREFIX" && env TMPDIR="$PREFIX/tmp" npm_config_unsafe_perm=true npm_config_yes=true \
        npm_config_fund=false npm_config_audit=false npm_config_update_notifier=false \
        npm install --no-save "code-server@$VERSION" >"$PREFIX/install.log" 2>&1); then
  tail -40 "$PREFIX/install.log" >&2
  exit 1
fi
"$CS" --version >/dev/null
echo "$CS"
