# What finds tpaudit in an installed prefix: tpaudit.pc (pkg-config) and the
# CMake package config (tpauditConfig.cmake, its version file, the INTERFACE
# target tpaudit::tpaudit). Both are relocatable: they locate the prefix from
# their own directory, so a moved prefix keeps correct paths.

# A prefix's files only (the Python package has its own layout,
# cmake/layout.cmake): libtpaudit.so in TPAUDIT_SHIM_INSTALL_DIR (lib).

set(TPAUDIT_PC_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH TPAUDIT_PC_TO_PREFIX /prefix/${TPAUDIT_PC_INSTALL_DIR} /prefix)
string(REGEX REPLACE "/$" "" TPAUDIT_PC_TO_PREFIX "${TPAUDIT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/tpaudit.pc.in ${CMAKE_BINARY_DIR}/tpaudit.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/tpaudit.pc DESTINATION ${TPAUDIT_PC_INSTALL_DIR})

include(CMakePackageConfigHelpers)
set(TPAUDIT_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tpaudit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tpauditConfig.cmake.in
  ${CMAKE_BINARY_DIR}/tpauditConfig.cmake
  INSTALL_DESTINATION ${TPAUDIT_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR TPAUDIT_SHIM_INSTALL_DIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/tpauditConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_BINARY_DIR}/tpauditConfig.cmake ${CMAKE_BINARY_DIR}/tpauditConfigVersion.cmake
  DESTINATION ${TPAUDIT_CMAKE_INSTALL_DIR})

# The same package config for the build tree, which mirrors a prefix (bin/,
# lib/, and include/ with a copy of the header): tprt (kernels/), a project
# of its own, finds tpaudit through it as it would an installed one (the top
# level sets tpaudit_DIR to TPAUDIT_BUILD_TREE_CONFIG_DIR).
set(TPAUDIT_BUILD_TREE_CONFIG_DIR ${CMAKE_BINARY_DIR}/${TPAUDIT_CMAKE_INSTALL_DIR})
configure_file(${PROJECT_SOURCE_DIR}/include/tpaudit.h ${CMAKE_BINARY_DIR}/${CMAKE_INSTALL_INCLUDEDIR}/tpaudit.h COPYONLY)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tpauditConfig.cmake.in
  ${TPAUDIT_BUILD_TREE_CONFIG_DIR}/tpauditConfig.cmake
  INSTALL_DESTINATION ${TPAUDIT_CMAKE_INSTALL_DIR} INSTALL_PREFIX ${CMAKE_BINARY_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR TPAUDIT_SHIM_INSTALL_DIR)
configure_file(${CMAKE_BINARY_DIR}/tpauditConfigVersion.cmake ${TPAUDIT_BUILD_TREE_CONFIG_DIR}/tpauditConfigVersion.cmake
  COPYONLY)
