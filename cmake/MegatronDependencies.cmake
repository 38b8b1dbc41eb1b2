# spdlog (with fmt), CLI11, nlohmann-json, toml++ (header-only) and, for the tests, GoogleTest. Normally Debian's packages. On a
# machine without system packages (a GPU box with only the torch wheel, CMake and Ninja),
# MEGATRON_DEPS_DIR names a folder where scripts/pack_gpu_deps.sh copied the same headers and
# GoogleTest's sources; spdlog and fmt are then used header-only.
set(MEGATRON_DEPS_DIR "" CACHE PATH "Bundled spdlog/fmt/CLI11/GoogleTest (scripts/pack_gpu_deps.sh); empty: system packages")

if(MEGATRON_DEPS_DIR)
  foreach(_dep spdlog/include/spdlog fmt/include/fmt CLI11/include/CLI nlohmann_json/include/nlohmann
               tomlplusplus/include/toml++ googletest/CMakeLists.txt)
    if(NOT EXISTS "${MEGATRON_DEPS_DIR}/${_dep}")
      message(FATAL_ERROR "[megatron] MEGATRON_DEPS_DIR=${MEGATRON_DEPS_DIR} has no ${_dep}; "
                          "run scripts/pack_gpu_deps.sh on a machine with the Debian packages")
    endif()
  endforeach()
  # Separate include folders, so that only the logging unit (which never sees torch's own fmt)
  # gets fmt 9.
  add_library(megatron_spdlog INTERFACE)
  target_include_directories(megatron_spdlog SYSTEM INTERFACE "${MEGATRON_DEPS_DIR}/spdlog/include"
                                                              "${MEGATRON_DEPS_DIR}/fmt/include")
  target_compile_definitions(megatron_spdlog INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY)
  add_library(spdlog::spdlog ALIAS megatron_spdlog)
  add_library(megatron_cli11 INTERFACE)
  target_include_directories(megatron_cli11 SYSTEM INTERFACE "${MEGATRON_DEPS_DIR}/CLI11/include")
  add_library(CLI11::CLI11 ALIAS megatron_cli11)
  add_library(megatron_nlohmann_json INTERFACE)
  target_include_directories(megatron_nlohmann_json SYSTEM INTERFACE "${MEGATRON_DEPS_DIR}/nlohmann_json/include")
  add_library(nlohmann_json::nlohmann_json ALIAS megatron_nlohmann_json)
  set(MEGATRON_TOMLPLUSPLUS_INCLUDE_DIR "${MEGATRON_DEPS_DIR}/tomlplusplus/include")
else()
  find_package(spdlog CONFIG REQUIRED)
  find_package(CLI11 CONFIG REQUIRED)
  find_package(nlohmann_json 3.10 CONFIG REQUIRED)
  find_path(MEGATRON_TOMLPLUSPLUS_INCLUDE_DIR toml++/toml.h)
  if(NOT MEGATRON_TOMLPLUSPLUS_INCLUDE_DIR)
    message(FATAL_ERROR "[megatron] toml++ is missing (Debian: libtomlplusplus-dev; scripts/setup.sh installs it)")
  endif()
endif()
# Oniguruma and utf8proc (compiled libraries, for HuggingFaceTokenizer): Debian's libonig-dev and
# libutf8proc-dev, or their headers and shared libraries copied under MEGATRON_DEPS_DIR.
foreach(_lib onig utf8proc)
  string(TOUPPER "${_lib}" _LIB)
  set(_header "${_lib}.h")
  if(_lib STREQUAL "onig")
    set(_header oniguruma.h)
  endif()
  find_path(MEGATRON_${_LIB}_INCLUDE_DIR ${_header} HINTS "${MEGATRON_DEPS_DIR}/${_lib}/include")
  find_library(MEGATRON_${_LIB}_LIBRARY ${_lib} HINTS "${MEGATRON_DEPS_DIR}/${_lib}/lib")
  if(NOT MEGATRON_${_LIB}_INCLUDE_DIR OR NOT MEGATRON_${_LIB}_LIBRARY)
    message(FATAL_ERROR "[megatron] ${_lib} is missing (Debian: lib${_lib}-dev; scripts/setup.sh installs it)")
  endif()
endforeach()

# toml++ is used header-only (TOML_HEADER_ONLY in the one file that reads --config), so that the
# bundled copy and Debian's package build the same way.
add_library(megatron_tomlplusplus INTERFACE)
target_include_directories(megatron_tomlplusplus SYSTEM INTERFACE "${MEGATRON_TOMLPLUSPLUS_INCLUDE_DIR}")

# GoogleTest, for tests/: called from there so that a build without tests never needs it.
macro(megatron_find_gtest)
  if(MEGATRON_DEPS_DIR)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    add_subdirectory("${MEGATRON_DEPS_DIR}/googletest" "${PROJECT_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
  else()
    find_package(GTest CONFIG REQUIRED)
  endif()
endmacro()
