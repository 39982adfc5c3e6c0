# strata_add_test(NAME name SOURCES files... [LABELS l...] [TIMEOUT s]
#                 [INTERNAL]): one CMocka executable registered with ctest.
# INTERNAL tests may include module headers (base/, wire/, orch/...).
# Every test links the static library built with STRATA_TESTING.
function(strata_add_test)
  cmake_parse_arguments(T "INTERNAL" "NAME;TIMEOUT" "SOURCES;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE strata_static PkgConfig::CMOCKA strata_testutil)
  if(T_INTERNAL)
    foreach(mod strata_base strata_wire strata_sim strata_chip strata_orch)
      target_include_directories(${T_NAME} PRIVATE
        $<TARGET_PROPERTY:${mod},INTERFACE_INCLUDE_DIRECTORIES>)
    endforeach()
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}")
endfunction()
