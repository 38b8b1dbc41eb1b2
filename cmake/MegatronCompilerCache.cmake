# ccache in front of the compiler, keyed on paths relative to the source tree so that fresh
# clones in other folders hit the same cache; the settings precompiled headers need are set here.
find_program(MEGATRON_CCACHE ccache)
if(MEGATRON_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER AND NOT DEFINED ENV{MEGATRON_NO_CCACHE})
  set(_ccache_env
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
      "CCACHE_NOHASHDIR=true"
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_COMPILERCHECK=content")
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CMAKE_COMMAND};-E;env;${_ccache_env};${MEGATRON_CCACHE}")
  set(CMAKE_C_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")
  set(CMAKE_CUDA_COMPILER_LAUNCHER "${CMAKE_CXX_COMPILER_LAUNCHER}")  # ccache knows nvcc
endif()
