# install(): the library, its headers, and a CMake package so that downstream projects can do
#   find_package(megatron_cpp REQUIRED)  +  target_link_libraries(app PRIVATE megatron::megatron)
include(CMakePackageConfigHelpers)
set(MEGATRON_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/megatron_cpp")

# The installed library finds LibTorch (and NCCL) where it was built against: RUNPATH is not
# inherited from the program, so the library must name the folders itself.
set(_megatron_install_rpath "${MEGATRON_TORCH_SITE}/lib")
if(MEGATRON_WITH_NCCL)
  get_filename_component(_nccl_dir "${MEGATRON_NCCL_LIBRARY}" DIRECTORY)
  list(APPEND _megatron_install_rpath "${_nccl_dir}")
endif()
set_target_properties(megatron PROPERTIES INSTALL_RPATH "${_megatron_install_rpath}"
                                          INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS megatron EXPORT megatron_cppTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/megatron" "${PROJECT_BINARY_DIR}/include/megatron"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT megatron_cppTargets NAMESPACE megatron:: DESTINATION ${MEGATRON_CMAKE_INSTALL_DIR})

configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/megatron_cppConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/megatron_cppConfig.cmake"
  INSTALL_DESTINATION ${MEGATRON_CMAKE_INSTALL_DIR})
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/megatron_cppConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/megatron_cppConfig.cmake"
              "${PROJECT_BINARY_DIR}/megatron_cppConfigVersion.cmake"
        DESTINATION ${MEGATRON_CMAKE_INSTALL_DIR})
