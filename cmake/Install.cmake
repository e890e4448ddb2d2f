# Installs the libraries, headers and an exported CMake package so that another project
# can find_package(pipeweave) and link pipeweave::passes.
include(CMakePackageConfigHelpers)
get_property(pw_libraries GLOBAL PROPERTY PW_LIBRARIES)
install(TARGETS ${pw_libraries} EXPORT pipeweaveTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET pipeweave)
  install(TARGETS pipeweave RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(dir ir ops passes cost_model simulator viz models executor search ab)
  install(DIRECTORY ${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipeweave/${dir}
    FILES_MATCHING PATTERN "*.h")
endforeach()
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipeweave/proto FILES_MATCHING PATTERN "*.pb.h")
install(FILES ${PROJECT_BINARY_DIR}/proto/pipeweave.pb.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipeweave/proto)
install(EXPORT pipeweaveTargets NAMESPACE pipeweave::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pipeweave)
configure_package_config_file(cmake/pipeweaveConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pipeweaveConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pipeweave)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/pipeweaveConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/pipeweaveConfig.cmake
  ${PROJECT_BINARY_DIR}/pipeweaveConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/pipeweave)
