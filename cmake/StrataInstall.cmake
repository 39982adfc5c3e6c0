# Installs the library for outside users: the public headers, libstrata.so
# (versioned) and libstrata.a, a pkg-config file and a CMake package that
# gives strata::strata (shared) and strata::strata_static. Included by the
# top-level CMakeLists once both library targets exist.
include(CMakePackageConfigHelpers)

set(STRATA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/strata)

install(TARGETS strata strata_static
  EXPORT strataTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/strata
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT development
  FILES_MATCHING PATTERN "*.h")

# CMake package. The export names the targets strata::strata and
# strata::strata_static; the static one carries Threads::Threads and
# OpenSSL::Crypto, which strataConfig.cmake finds again for the consumer.
install(EXPORT strataTargets
  NAMESPACE strata::
  DESTINATION ${STRATA_CMAKE_DIR}
  COMPONENT development)
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/strataConfig.cmake.in
  ${PROJECT_BINARY_DIR}/strataConfig.cmake
  INSTALL_DESTINATION ${STRATA_CMAKE_DIR})
# 0.x: a minor bump may break the API, so only the same minor is compatible.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/strataConfig.cmake
  ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
  DESTINATION ${STRATA_CMAKE_DIR}
  COMPONENT development)

# pkg-config. Paths are written relative to ${pcfiledir} so the file stays
# right when `cmake --install --prefix` picks another prefix than the one
# configured.
set(STRATA_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(STRATA_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(STRATA_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(STRATA_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH up /prefix/${STRATA_PC_DIR} /prefix)
  string(REGEX REPLACE "/$" "" up "${up}")
  set(STRATA_PC_PREFIX "\${pcfiledir}/${up}")
  set(STRATA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(STRATA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/strata.pc.in
  ${PROJECT_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata.pc
  DESTINATION ${STRATA_PC_DIR}
  COMPONENT development)
