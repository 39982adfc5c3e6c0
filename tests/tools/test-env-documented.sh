#!/bin/sh
# Every STRATA_* environment variable the library, the backends, the
# daemon or the tools read must have a row in the README's "Environment
# variables" table: a variable a user cannot find is a variable they
# cannot set or unset on purpose. Tests, examples and benchmarks may read
# their own variables; they are not checked.
#   test-env-documented.sh SOURCE_DIR
set -eu
src=${1:?usage: test-env-documented.sh SOURCE_DIR}
cd "$src"

table=$(sed -n '/^## Environment variables/,/^## /p' README.md)
[ -n "$table" ] || { echo "README.md has no '## Environment variables' section"; exit 1; }

vars=$(grep -rhoE '(getenv|base_env_flag)\("STRATA_[A-Z0-9_]+"' \
    base chip cuda domain graph orch sim tier tools wire worker \
    --include='*.c' --include='*.h' | sed 's/.*("//; s/"$//' | sort -u)
[ -n "$vars" ] || { echo "found no STRATA_* variable in the sources"; exit 1; }

missing=0
for v in $vars; do
    if ! printf '%s\n' "$table" | grep -q "\`$v[=\`]"; then
        echo "not in README.md's environment table: $v"
        where=$(grep -rlE "(getenv|base_env_flag)\(\"$v\"" base chip cuda \
            domain graph orch sim tier tools wire worker | head -3 | tr '\n' ' ')
        echo "  read in: $where"
        missing=$((missing + 1))
    fi
done
[ "$missing" -eq 0 ] || exit 1
echo "$(printf '%s\n' "$vars" | wc -l) variables, all documented"
