#!/usr/bin/env bash
# Make the RustSec snapshot in ../shared/advisory-db readable by `cargo deny --offline`:
# cargo-deny opens its database as a git checkout at <db-path>/advisory-db-<url hash>, so
# copy the snapshot there and commit it once, dated as the snapshot.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${ADVISORY_DB:-"$root/../shared/advisory-db"}
dest="$root/target/advisory-dbs/advisory-db-3157b0e258782691"
if [ ! -d "$src/crates" ]; then
  echo "advisory-db.sh: no advisory snapshot at $src" >&2
  exit 1
fi
rm -rf "$dest"
mkdir -p "$dest"
cp -R "$src/." "$dest/"
chmod -R u+w "$dest"
cd "$dest"
git init -q
git add -A
export GIT_AUTHOR_DATE=2026-08-21T00:00:00Z GIT_COMMITTER_DATE=2026-08-21T00:00:00Z
git -c user.name=advisory-snapshot -c user.email=snapshot@localhost commit -qm "RustSec snapshot"
echo "advisory-db.sh: snapshot ready at target/advisory-dbs"
