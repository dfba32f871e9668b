#!/usr/bin/env bash
# Rebuild credit_sim and regenerate the tables in test/sim/README.md (the
# part between the GENERATED markers).  Usage, from anywhere:
#     bash test/sim/make_tables.sh            # full run (about a minute)
#     bash test/sim/make_tables.sh --quick    # small run, README untouched, exit status = invariants
# Needs only g++ (C++17).  The binary goes to a temporary directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

g++ -std=c++17 -O2 -Wall -Wextra -I "$top" -I "$here" \
    "$top"/common/credit/*.cc "$here"/credit_sim.cc "$here"/sim_world.cc "$here"/sim_patterns.cc \
    -o "$tmp/credit_sim"

if [ "${1:-}" = "--quick" ]; then
    exec "$tmp/credit_sim" --quick
fi

"$tmp/credit_sim" >"$tmp/tables.md"
readme="$here/README.md"
begin='<!-- BEGIN GENERATED: bash test/sim/make_tables.sh -->'
end='<!-- END GENERATED -->'
grep -qF "$begin" "$readme" && grep -qF "$end" "$readme" || { echo "markers missing in $readme" >&2; exit 1; }
awk -v b="$begin" -v e="$end" -v f="$tmp/tables.md" '
    $0 == b { print; while ((getline line < f) > 0) print line; skip = 1; next }
    $0 == e { skip = 0 }
    !skip { print }' "$readme" >"$tmp/README.md"
cp "$tmp/README.md" "$readme"
echo "updated $readme"
