# The build's system packages, each found through pkg-config; a missing one
# stops the configure step with one line that names the package to install
# on Debian/Ubuntu and on Fedora (not pkg-config's "required by
# 'virtual:world'"). Binary wheels vendor these libraries (docs/INSTALL.md).
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "tpaudit: pkg-config not found: install pkg-config (Debian/Ubuntu) or pkgconf-pkg-config (Fedora)")
endif()

# tpaudit_require_module(PREFIX module debian-package fedora-package): a
# macro, so PREFIX_INCLUDE_DIRS and the rest land in the caller's scope.
macro(tpaudit_require_module prefix module debian fedora)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "tpaudit: ${module} not found by pkg-config: install ${debian} (Debian/Ubuntu) or ${fedora} (Fedora)")
  endif()
endmacro()

tpaudit_require_module(SQLITE3 sqlite3 libsqlite3-dev sqlite-devel)
tpaudit_require_module(LIBUNWIND libunwind libunwind-dev libunwind-devel)
tpaudit_require_module(LIBDW libdw libdw-dev elfutils-devel)
