# Checks that the program shown in README.md (between the markers below) is
# examples/minimal/main.c byte for byte, so the README's program is one that
# compiles and passes its test. With -DUPDATE=ON it copies main.c into the
# README instead.
#   cmake -DREADME=README.md -DSOURCE=examples/minimal/main.c [-DUPDATE=ON] \
#         -P examples/minimal/readme_sync.cmake
set(begin_marker "<!-- begin examples/minimal/main.c -->\n```c\n")
set(end_marker "```\n<!-- end examples/minimal/main.c -->")

file(READ "${README}" readme)
file(READ "${SOURCE}" source)
string(FIND "${readme}" "${begin_marker}" b)
string(FIND "${readme}" "${end_marker}" e)
if(b EQUAL -1 OR e EQUAL -1 OR e LESS b)
  message(FATAL_ERROR "${README}: markers for examples/minimal/main.c missing")
endif()
string(LENGTH "${begin_marker}" begin_len)
math(EXPR start "${b} + ${begin_len}")
math(EXPR len "${e} - ${start}")
string(SUBSTRING "${readme}" ${start} ${len} block)

if(block STREQUAL source)
  message(STATUS "README.md shows examples/minimal/main.c as it is")
elseif(UPDATE)
  string(SUBSTRING "${readme}" 0 ${start} head)
  string(SUBSTRING "${readme}" ${e} -1 tail)
  file(WRITE "${README}" "${head}${source}${tail}")
  message(STATUS "README.md updated from ${SOURCE}")
else()
  message(FATAL_ERROR "README.md's program differs from ${SOURCE}; run "
    "cmake -DREADME=README.md -DSOURCE=examples/minimal/main.c -DUPDATE=ON "
    "-P examples/minimal/readme_sync.cmake")
endif()
