# Finds LibTorch inside the project's Python venv (.venv, or $MEGATRON_VENV) so that nobody types
# a path, and makes the wheel's CUDA libraries (site-packages/nvidia/*/lib) linkable and loadable.
#
# Sets: MEGATRON_PYTHON_EXECUTABLE, MEGATRON_TORCH_SITE (site-packages/torch),
#       MEGATRON_TORCH_HAS_CUDA, MEGATRON_NVIDIA_LIB_DIRS, and the Torch package's own variables.

# A wheel build (pip install ., SKBUILD) takes LibTorch from the Python that runs it, whose torch
# is the one the installed package will load.
if(NOT MEGATRON_PYTHON_EXECUTABLE AND SKBUILD AND Python_EXECUTABLE)
  set(MEGATRON_PYTHON_EXECUTABLE "${Python_EXECUTABLE}")
endif()
set(_megatron_venv_candidates "$ENV{MEGATRON_VENV}" "${PROJECT_SOURCE_DIR}/.venv")
if(NOT MEGATRON_PYTHON_EXECUTABLE)
  foreach(_venv IN LISTS _megatron_venv_candidates)
    if(_venv AND EXISTS "${_venv}/bin/python")
      set(MEGATRON_PYTHON_EXECUTABLE "${_venv}/bin/python")
      break()
    endif()
  endforeach()
endif()
if(NOT MEGATRON_PYTHON_EXECUTABLE)
  find_program(MEGATRON_PYTHON_EXECUTABLE NAMES python3 python)
endif()
set(MEGATRON_PYTHON_EXECUTABLE "${MEGATRON_PYTHON_EXECUTABLE}" CACHE FILEPATH
    "Python whose torch package provides LibTorch")

execute_process(
  COMMAND "${MEGATRON_PYTHON_EXECUTABLE}" -c
          "import os, torch; print(os.path.dirname(os.path.realpath(torch.__file__))); print(torch.__version__); print(int(torch.version.cuda is not None))"
  OUTPUT_VARIABLE _torch_info
  RESULT_VARIABLE _torch_rc
  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR
    "[megatron] LibTorch not found: '${MEGATRON_PYTHON_EXECUTABLE} -c \"import torch\"' failed. "
    "Run scripts/setup.sh (it creates .venv with torch), or set MEGATRON_PYTHON_EXECUTABLE.")
endif()
string(REPLACE "\n" ";" _torch_info "${_torch_info}")
list(GET _torch_info 0 MEGATRON_TORCH_SITE)
list(GET _torch_info 1 MEGATRON_TORCH_VERSION)
list(GET _torch_info 2 MEGATRON_TORCH_HAS_CUDA)

# The wheel's CUDA libraries: one lib/ folder per nvidia-* package, versioned sonames only.
get_filename_component(_site_packages "${MEGATRON_TORCH_SITE}" DIRECTORY)
file(GLOB MEGATRON_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${_site_packages}/nvidia/*/lib"
     "${_site_packages}/nvidia/cu*/lib")
list(REMOVE_DUPLICATES MEGATRON_NVIDIA_LIB_DIRS)

if(MEGATRON_TORCH_HAS_CUDA)
  # Torch's config looks for the CUDA toolkit; cuDNN and friends come from the wheel.
  find_package(CUDAToolkit QUIET)
  if(NOT CUDAToolkit_FOUND)
    message(STATUS "[megatron] torch has CUDA but no CUDA toolkit was found: building for CPU only")
    set(MEGATRON_TORCH_HAS_CUDA 0)
  endif()
  foreach(_dir IN LISTS MEGATRON_NVIDIA_LIB_DIRS)
    # The linker must resolve libtorch_cuda's own dependencies (libcudnn.so.9, ...).
    add_link_options("LINKER:-rpath-link,${_dir}")
  endforeach()
  if(EXISTS "${_site_packages}/nvidia/cudnn/include")
    set(CUDNN_INCLUDE_PATH "${_site_packages}/nvidia/cudnn/include" CACHE PATH "")
  endif()
endif()

list(PREPEND CMAKE_PREFIX_PATH "${MEGATRON_TORCH_SITE}/share/cmake")
# Torch's config writes the -gencode flags of the library's own kernels from this list; without
# it and without a visible GPU it picks every architecture, some of which this nvcc no longer
# knows. H100/H200 (9.0) unless the caller says otherwise.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
# Torch's config warns about kineto and the python library; they are not used here.
set(_megatron_saved_log_level "${CMAKE_MESSAGE_LOG_LEVEL}")
set(CMAKE_MESSAGE_LOG_LEVEL ERROR)
find_package(Torch REQUIRED CONFIG)
set(CMAKE_MESSAGE_LOG_LEVEL "${_megatron_saved_log_level}")
message(STATUS "[megatron] LibTorch ${MEGATRON_TORCH_VERSION} from ${MEGATRON_TORCH_SITE} (CUDA: ${MEGATRON_TORCH_HAS_CUDA})")
