#!/bin/sh
# tools/trace-page on a committed strata trace: the page embeds the trace
# and its lanes; unreadable input, and an output it cannot write, fail
# with status 1 and say why, in one line; where
# chromium is installed, --png writes a PNG. Usage: test-trace-page.sh SRC.
set -eu
src=$1
tool=$src/tools/trace-page
trace=$src/tests/fuzz/corpus/fuzz_trace/strata_small.json
dir=$(mktemp -d /tmp/strata-trace-page.XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "test-trace-page: $*" >&2; exit 1; }

"$tool" "$trace" -o "$dir/page.html" --title "small <trace>" >"$dir/out" ||
    fail "trace-page failed: $(cat "$dir/out")"
grep -q '<canvas id="c">' "$dir/page.html" || fail "no canvas in the page"
grep -q 'small &lt;trace&gt;' "$dir/page.html" || fail "title not escaped"
grep -q '"process_name"' "$dir/page.html" || fail "the trace is not embedded"
# The embedded JSON parses back to the same events.
python3 - "$trace" "$dir/page.html" <<'PY' || fail "embedded trace differs"
import json, re, sys
want = json.load(open(sys.argv[1]))
page = open(sys.argv[2]).read()
m = re.search(r'<script id="trace" type="application/json">(.*?)</script>',
              page, re.S)
got = json.loads(m.group(1).replace("<\\/", "</"))
sys.exit(0 if got == want else 1)
PY

printf '{"traceEvents": [' >"$dir/bad.json"
if "$tool" "$dir/bad.json" -o "$dir/bad.html" 2>"$dir/err"; then
    fail "a truncated trace was accepted"
fi
grep -q "bad.json" "$dir/err" || fail "the error does not name the file"
# Nesting past Python's recursion limit: one line, no traceback.
python3 -c 'print("{\"traceEvents\": [" + "[" * 5000 + "]" * 5000 + "]}")' \
    >"$dir/deep.json"
if "$tool" "$dir/deep.json" -o "$dir/deep.html" 2>"$dir/err"; then
    fail "a trace nested 5000 deep was accepted"
fi
grep -q "deep.json: nested too deeply" "$dir/err" ||
    fail "deep nesting: $(cat "$dir/err")"
if grep -q Traceback "$dir/err"; then fail "a traceback: $(cat "$dir/err")"; fi
# It speaks under the name it was installed as.
ln -s "$(cd "$(dirname "$tool")" && pwd)/trace-page" "$dir/strata-trace-page"
"$dir/strata-trace-page" --help >"$dir/out"
grep -q "^usage: strata-trace-page" "$dir/out" ||
    fail "--help names another program: $(cat "$dir/out")"
if "$tool" "$dir/missing.json" 2>/dev/null; then
    fail "a missing trace was accepted"
fi
# An output it cannot write: one line naming it, no traceback.
if "$tool" "$trace" -o "$dir/no/such/dir/x.html" 2>"$dir/err"; then
    fail "an unwritable output was accepted"
fi
grep -q "cannot write $dir/no/such/dir/x.html" "$dir/err" ||
    fail "the error does not name the output: $(cat "$dir/err")"
if grep -q Traceback "$dir/err"; then fail "a traceback: $(cat "$dir/err")"; fi

if command -v chromium >/dev/null 2>&1; then
    "$tool" "$trace" -o "$dir/page.html" --png "$dir/page.png" >/dev/null ||
        fail "--png failed"
    [ "$(head -c 4 "$dir/page.png" | od -An -c | tr -d ' ')" = "211PNG" ] ||
        fail "--png wrote no PNG"
fi
echo "test-trace-page: ok"
