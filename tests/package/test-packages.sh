#!/usr/bin/env bash
# tests/package/test-packages.sh: installs the Debian packages that
# ci/package built (DEB_DIR, default build/package) into a clean
# directory with dpkg -x (no maintainer scripts run, nothing on the host
# changes), checks what each package holds and declares, then builds the
# README's minimal program (examples/minimal/main.c) against the installed
# files, through pkg-config and through find_package(strata), and runs it,
# and runs the installed strata and strata-node. ci/test's package stage
# runs it after ci/package.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

deb_dir=${DEB_DIR:-build/package}
arch=$(dpkg --print-architecture)
multiarch=$(gcc -print-multiarch)
tmp=$(mktemp -d /tmp/strata-package-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir -p "$root"

fail() {
    echo "test-packages: $*" >&2
    exit 1
}

for p in libstrata0 libstrata-dev strata-node strata-tools strata-mpi; do
    deb=$deb_dir/${p}_0.1.0_${arch}.deb
    [ -f "$deb" ] || fail "no $deb (run ci/package first)"
    dpkg-deb -x "$deb" "$root"
done

lib=$root/usr/lib/$multiarch
for f in "$lib/libstrata.so.0" "$lib/libstrata.so" "$lib/libstrata.a" \
    "$lib/pkgconfig/strata.pc" "$lib/cmake/strata/strataConfig.cmake" \
    "$root/usr/include/strata/strata.h" "$root/usr/bin/strata" \
    "$root/usr/bin/strata-node" "$root/usr/bin/strata-trace-page" \
    "$root/usr/bin/strata-rank" \
    "$root/usr/share/man/man1/strata.1" \
    "$root/usr/share/man/man8/strata-node.8" \
    "$root/usr/lib/systemd/system/strata-node.service" \
    "$root/etc/default/strata-node"; do
    [ -e "$f" ] || fail "not installed: ${f#"$root"}"
done

# What each package declares: its own synopsis (the Description's first line), none repeated.
# (Whole fields read, no head: a pipe cut short is SIGPIPE under pipefail.)
synopses=$(for p in libstrata0 libstrata-dev strata-node strata-tools strata-mpi; do
    d=$(dpkg-deb -f "$deb_dir/${p}_0.1.0_${arch}.deb" Description)
    echo "${d%%$'\n'*}"
done)
[ "$(sort -u <<<"$synopses" | wc -l)" -eq 5 ] ||
    fail "packages share a synopsis: $synopses"
# Shipped stripped (no .symtab; binutils, not file(1), which a bare
# machine may lack); the static archive keeps its symbols for the link.
for f in "$root/usr/bin/strata" "$root/usr/bin/strata-node" \
    "$root/usr/bin/strata-rank" "$lib/libstrata.so.0"; do
    [[ $(readelf -S "$f") != *" .symtab "* ]] || fail "not stripped: ${f#"$root"}"
done
[[ $(nm "$lib/libstrata.a") == *" T strata_worker_create"* ]] ||
    fail "libstrata.a lost its symbols"
deps=$(dpkg-deb -f "$deb_dir/libstrata-dev_0.1.0_${arch}.deb" Depends)
[[ $deps == *"libstrata0 (= 0.1.0)"* ]] || fail "libstrata-dev Depends: $deps"
# strata.pc's Requires.private and strataConfig.cmake name jansson.
[[ $deps == *libjansson-dev* ]] || fail "libstrata-dev Depends lacks jansson: $deps"
deps=$(dpkg-deb -f "$deb_dir/strata-mpi_0.1.0_${arch}.deb" Depends)
[[ $deps == *openmpi-bin* && $deps == *libopenmpi* ]] ||
    fail "strata-mpi Depends: $deps"
deps=$(dpkg-deb -f "$deb_dir/libstrata0_0.1.0_${arch}.deb" Depends)
[[ $deps == *libssl3* ]] || fail "libstrata0 Depends lacks libssl3: $deps"
ctl=$tmp/node-control
dpkg-deb -e "$deb_dir/strata-node_0.1.0_${arch}.deb" "$ctl"
for s in postinst prerm postrm; do
    [ -x "$ctl/$s" ] || fail "strata-node has no executable $s"
    sh -n "$ctl/$s" || fail "strata-node $s: syntax error"
done
grep -q 'useradd --system' "$ctl/postinst" || fail "postinst makes no user"
grep -qx /etc/default/strata-node "$ctl/conffiles" ||
    fail "/etc/default/strata-node is not a conffile"
grep -q '^ExecStart=/usr/bin/strata-node ' \
    "$root/usr/lib/systemd/system/strata-node.service" ||
    fail "the unit does not run /usr/bin/strata-node"
grep -q '^User=strata$' "$root/usr/lib/systemd/system/strata-node.service" ||
    fail "the unit does not run as user strata"

echo "-- the minimal program via pkg-config"
export PKG_CONFIG_PATH=$lib/pkgconfig
# shellcheck disable=SC2046 # pkg-config output is a list of flags
cc -std=c11 -Wall -Wextra -Wpedantic -Werror examples/minimal/main.c \
    -o "$tmp/minimal" $(pkg-config --cflags --libs strata)
# Whole outputs, then grep: with pipefail, grep -q leaving early makes the
# writer die of SIGPIPE and the pipeline fail (seen once in CI).
deps=$(LD_LIBRARY_PATH=$lib ldd "$tmp/minimal")
grep -q "$lib/libstrata.so.0" <<<"$deps" ||
    fail "minimal does not link the installed libstrata.so.0: $deps"
LD_LIBRARY_PATH=$lib timeout 120 "$tmp/minimal" >"$tmp/minimal.out"
grep -q . "$tmp/minimal.out" || fail "minimal printed nothing"
cat "$tmp/minimal.out"

echo "-- the minimal program via find_package(strata)"
mkdir -p "$tmp/proj"
cp examples/minimal/main.c "$tmp/proj/main.c"
cat >"$tmp/proj/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(minimal_consumer LANGUAGES C)
find_package(strata 0.1 REQUIRED)
add_executable(minimal main.c)
target_link_libraries(minimal PRIVATE strata::strata)
CMAKE
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$root/usr" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/proj/build" >/dev/null
LD_LIBRARY_PATH=$lib timeout 120 "$tmp/proj/build/minimal" >/dev/null

echo "-- the installed tools"
version=$("$root/usr/bin/strata" --version)
grep -q "strata 0.1.0" <<<"$version" || fail "strata --version: $version"
help=$("$root/usr/bin/strata-node" --help)
grep -q -- "--secret-file" <<<"$help" || fail "strata-node --help"
"$root/usr/bin/strata" node keygen "$tmp/key" >/dev/null
[ "$(stat -c %a "$tmp/key")" = 600 ] || fail "keygen mode"
echo "test-packages: ok"
