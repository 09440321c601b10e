# Where the parts are installed. A prefix (cmake --install): bin/tpaudit,
# lib/libtpaudit.so, share/tpaudit/python (the probe and its bootstrap); the
# CLI finds the shim at <bindir>/../lib, the shim the probe at
# <libdir>/../share/tpaudit/python. The Python package (scikit-build-core
# sets SKBUILD; the install prefix is site-packages): everything native
# inside the package, tpaudit/_bin/tpaudit, tpaudit/_lib/libtpaudit.so and
# the bootstrap in tpaudit/_probe, found from the package the same way
# (../_lib, ../_probe), so venv, --user, --prefix and --target installs
# work alike; data files go to the environment's data root.
if(SKBUILD)
  set(TPAUDIT_CLI_INSTALL_DIR tpaudit/_bin)
  set(TPAUDIT_SHIM_INSTALL_DIR tpaudit/_lib)
  set(TPAUDIT_PROBE_INSTALL_DIR tpaudit/_probe)
  set(TPAUDIT_PACKAGE_INSTALL_DIR tpaudit)
  set(TPAUDIT_DATA_DIR ${SKBUILD_DATA_DIR}/)
else()
  set(TPAUDIT_CLI_INSTALL_DIR ${CMAKE_INSTALL_BINDIR})
  set(TPAUDIT_SHIM_INSTALL_DIR lib)
  set(TPAUDIT_PROBE_INSTALL_DIR share/tpaudit/python)
  set(TPAUDIT_PACKAGE_INSTALL_DIR share/tpaudit/python/tpaudit)
  set(TPAUDIT_DATA_DIR "")
endif()
