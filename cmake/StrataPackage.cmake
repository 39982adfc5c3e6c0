# Debian packages with CPack (ci/package builds them):
#   libstrata0     component runtime:     libstrata.so.0
#   libstrata-dev  component development: headers, libstrata.so, .a,
#                  pkg-config and CMake files
#   strata-node    component node:        strata-node, strata-node(8), its
#                  systemd unit and /etc/default file, the strata user
#                  (postinst)
#   strata-tools   component tools:       strata, strata(1)
# Configure with -DCMAKE_INSTALL_PREFIX=/usr (Debian's multiarch libdir)
# and -DSTRATA_PACKAGE_DEB=ON, which installs the unit and /etc file.
option(STRATA_PACKAGE_DEB "Install the Debian-only files (systemd unit)" OFF)

set(STRATA_DEB_DIR ${PROJECT_SOURCE_DIR}/packaging/deb)
install(FILES ${PROJECT_SOURCE_DIR}/tools/man/strata.1
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
install(FILES ${PROJECT_SOURCE_DIR}/tools/man/strata-node.8
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man8 COMPONENT node)
if(STRATA_PACKAGE_DEB)
  install(FILES ${STRATA_DEB_DIR}/strata-node.service
    DESTINATION lib/systemd/system COMPONENT node)
  install(FILES ${STRATA_DEB_DIR}/strata-node.default
    DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/default
    RENAME strata-node COMPONENT node)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME strata)
set(CPACK_PACKAGE_VENDOR strata)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "strata maintainers <strata@localhost>")
# No common summary: CPack would put it in front of every package's
# description, whose first line is that package's own synopsis.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "")
set(CPACK_STRIP_FILES ON) # the symbols stay in the build tree
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development node tools)
if(TARGET strata-rank) # built where Open MPI was found
  list(APPEND CPACK_COMPONENTS_ALL mpi)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON) # dpkg-shlibdeps fills Depends
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libstrata0)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "strata runtime library\nstrata runs C work on a tree of processes with shared-memory\ncommunication domains.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libstrata-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS runtime)
# The static archive and find_package(strata) need these at the link.
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
  "libssl-dev, libevent-dev, libmsgpack-dev, libjansson-dev, pkg-config")
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
  "strata runtime library: development files\nHeaders, the static library, pkg-config and CMake package files.")

set(CPACK_DEBIAN_NODE_PACKAGE_NAME strata-node)
set(CPACK_DEBIAN_NODE_PACKAGE_SECTION net)
set(CPACK_DEBIAN_NODE_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_EXTRA
  ${STRATA_DEB_DIR}/postinst ${STRATA_DEB_DIR}/prerm ${STRATA_DEB_DIR}/postrm
  ${STRATA_DEB_DIR}/conffiles)
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_NODE_DESCRIPTION
  "strata remote node daemon\nstrata-node runs strata L3 sessions for parents that authenticate\nwith mutual TLS 1.3; with a systemd unit and a strata system user.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME strata-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
# strata-trace-page is a python3 script; its --png wants chromium.
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "python3")
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "chromium")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
  "strata command-line tool\nstrata gfg inspects, checks and converts .gfg graph stores; strata\nnode pings strata-node daemons and makes cluster keys;\nstrata-trace-page draws a timeline trace as an HTML page.")

set(CPACK_DEBIAN_MPI_PACKAGE_NAME strata-mpi)
set(CPACK_DEBIAN_MPI_PACKAGE_SECTION net)
# mpirun and orted on every host of a group; dpkg-shlibdeps adds the MPI
# library itself.
set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "openmpi-bin")
set(CPACK_DEBIAN_MPI_DESCRIPTION
  "strata Open MPI worker groups\nstrata-rank, the program every rank of an L4's MPI worker group runs\nunder mpirun (docs/mpi.md); install it on every host of a group.")

include(CPack)
