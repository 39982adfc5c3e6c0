# Doxygen input filter for include/strata/*.h (ci/apidocs): the headers
# use plain C comments (STYLE.md), which Doxygen ignores, so this turns
# them into Doxygen comments on the fly; the headers stay as they are.
#  - the file's first comment documents the file;
#  - a comment that starts a line documents what follows it;
#  - a comment after code on the same line documents that code;
#  - banners (/* ---- */) stay plain comments.
1s|^/\*( \|$)|/** @file\n * |
/^[[:space:]]*\/\* -+ \*\/$/b
/^[[:space:]]*\/\* -{2,}/b
s|^([[:space:]]*)/\*([^*]\|$)|\1/**\2|
s|([^[:space:]/][^/]*[;,{)a-zA-Z0-9_])([[:space:]]+)/\*([^*])|\1\2/**<\3|
