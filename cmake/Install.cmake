# What `cmake --install` puts in place, in two components (the .deb packages of cmake/Package.cmake):
#   cli  bin/datavo
#   dev  include/datavo/ (the public headers only: src/ holds the private ones), lib/libdatavo.a, the CMake package
#        lib/cmake/Datavo/ (find_package(Datavo) -> Datavo::datavo) and lib/pkgconfig/datavo.pc
# Everything is relative to the prefix, so that an installed tree can be moved (`cmake --install --prefix` picks it
# at install time).
include(CMakePackageConfigHelpers)
set(DATAVO_CMAKE_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Datavo)

install(TARGETS datavo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(TARGETS datavo_lib EXPORT DatavoTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
# `cmake --install --strip` (and cpack, CPACK_STRIP_FILES) strips the executable; CMake leaves static libraries
# alone, so their debug sections (most of the archive in a RelWithDebInfo build) are stripped here, as dh_strip
# does for a Debian -dev package.
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
      \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:datavo_lib>\"
      COMMAND_ERROR_IS_FATAL ANY)
  endif()" COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/datavo DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev
        FILES_MATCHING PATTERN "*.hpp")

install(EXPORT DatavoTargets NAMESPACE Datavo:: DESTINATION ${DATAVO_CMAKE_PACKAGE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/DatavoConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/DatavoConfig.cmake
                              INSTALL_DESTINATION ${DATAVO_CMAKE_PACKAGE_DIR})
# 0.x: a minor version may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/DatavoConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/DatavoConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/DatavoConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/DatavoCppHttplib.cmake
        DESTINATION ${DATAVO_CMAKE_PACKAGE_DIR} COMPONENT dev)

# datavo.pc finds its prefix from its own directory (${pcfiledir}), for the same reason.
file(RELATIVE_PATH DATAVO_PC_PREFIX_FROM_PCFILEDIR /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" DATAVO_PC_PREFIX_FROM_PCFILEDIR "${DATAVO_PC_PREFIX_FROM_PCFILEDIR}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/datavo.pc.in ${CMAKE_CURRENT_BINARY_DIR}/datavo.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/datavo.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
