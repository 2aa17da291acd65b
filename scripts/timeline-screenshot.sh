#!/usr/bin/env bash
# The README's screenshot of a session's timeline page: `mur trace --html` on a session's
# trace (by default the example session docs/timeline-example.jsonl; or a trace.jsonl, a
# records directory or a session id), then headless Chromium's --screenshot of the page,
# with no network (a dead loopback proxy, no host name resolves, background fetches off).
# Usage: scripts/timeline-screenshot.sh [TRACE|DIR|SESSION] [OUT.png]
#   (default OUT docs/timeline.png; MUR=path/to/mur, else the debug build, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-docs/timeline-example.jsonl}
png=${2:-docs/timeline.png}
mur=${MUR:-${CARGO_TARGET_DIR:-target}/debug/mur}
[ -x "$mur" ] || cargo build --locked --bin mur
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "chromium is not installed: apt-get install -y chromium" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
case $src in
  ses_*) from=(--session "$src") ;;
  *) from=("$src") ;;
esac
"$mur" trace "${from[@]}" --html "$work/page.html"
"$browser" --headless --disable-gpu --no-sandbox --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --proxy-server=127.0.0.1:9 '--host-resolver-rules=MAP * ~NOTFOUND' \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size=1100,860 \
  --screenshot="$work/shot.png" "file://$work/page.html" 2>/dev/null
# Kept small: 128 colours (ImageMagick's convert, when it is there) read the same.
if convert -version 2>/dev/null | grep -q ImageMagick; then
  convert "$work/shot.png" -colors 128 "PNG8:$work/small.png" && mv "$work/small.png" "$work/shot.png"
fi
cp "$work/shot.png" "$png"
echo "wrote $png ($(wc -c <"$png") bytes)"
