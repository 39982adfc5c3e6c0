#!/usr/bin/env bash
# ci/check-leftovers tells a strata name of a host's own strata (its maker
# alive, no build-tree program, started before the name) from a leftover,
# and a recycled pid (a process started after the name) from its maker.
set -euo pipefail
check=$1
dir=$(mktemp -d /tmp/check-leftovers-test.XXXXXX)
host=
trap 'rm -rf "$dir"; [ -z "$host" ] || kill "$host" 2>/dev/null || true' EXIT
run() {
    # Only this test's directory: not the host's processes, nor /tmp, where
    # tests running beside this one (ctest -j) keep live entries.
    env -u CHECK_LEFTOVERS_SINCE CHECK_LEFTOVERS_SHM_DIR="$dir" \
        CHECK_LEFTOVERS_NO_PROCS=1 CHECK_LEFTOVERS_GRACE_S=0 \
        "$check" >"$dir/out" 2>&1
}
expect() { # expect STATUS WHAT
    local rc=0
    run || rc=$?
    if [ "$rc" -ne "$1" ]; then
        echo "FAIL: $2: exit status $rc, wanted $1" >&2
        cat "$dir/out" >&2
        exit 1
    fi
}

expect 0 "an empty directory"
# A process of the host's (no build-tree program), then a name it made.
sleep 1000 &
host=$!
name="$dir/strata-$(id -u)-$host-b1"
: >"$name"
expect 0 "a name of a live host process that started before it"
# The same name made a minute before that process started: its maker died
# and the pid went to this one.
touch -d '1 minute ago' "$name"
expect 1 "a name older than the process holding its pid"
grep -q "strata-$(id -u)-$host-b1" "$dir/out"
rm -f "$name"
# A dead maker.
kill "$host"
wait "$host" 2>/dev/null || true
: >"$dir/strata-$(id -u)-$host-b2"
expect 1 "a name of a dead process"
echo "test-check-leftovers: ok"
