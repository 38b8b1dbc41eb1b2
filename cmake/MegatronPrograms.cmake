# megatron_add_program(name [INSTALL] SOURCES ...): an executable on the library (tools, examples,
# benches), landing in build/bin and reusing the library's precompiled LibTorch headers. INSTALL:
# `cmake --install` puts it in <prefix>/bin, finding the installed library beside it.
function(megatron_use_library_pch target)
  # Reusing the library's precompiled header needs the library's -fPIC, not the default -fPIE,
  # and its visibility flags.
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF CXX_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
  target_compile_options(${target} PRIVATE -fPIC)
  if(MEGATRON_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} REUSE_FROM megatron)
  endif()
endfunction()

function(megatron_add_program name)
  cmake_parse_arguments(arg "INSTALL" "" "SOURCES" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE megatron::megatron CLI11::CLI11)
  megatron_use_library_pch(${name})
  if(arg_INSTALL)
    # The installed library next door, LibTorch (and NCCL) where the build found them.
    set_target_properties(${name} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}"
                                             INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endfunction()
