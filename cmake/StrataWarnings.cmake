# House warnings (STYLE.md), applied to every target in the tree.
add_compile_options(-Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wformat=2 -Wundef -Wvla -Wcast-qual -Wwrite-strings
  -Wnull-dereference -Wimplicit-fallthrough -fno-common)
if(STRATA_WERROR)
  add_compile_options(-Werror)
endif()
