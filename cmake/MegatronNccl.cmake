# NCCL for collectives on CUDA tensors: the copy torch's wheel ships (nvidia-nccl), so that one
# process never loads two NCCL libraries; the CUDA toolkit's headers are the fallback.
set(MEGATRON_NCCL_FOUND FALSE)
if(MEGATRON_WITH_CUDA)
  get_filename_component(_site_packages "${MEGATRON_TORCH_SITE}" DIRECTORY)
  find_library(MEGATRON_NCCL_LIBRARY NAMES libnccl.so.2 nccl
               HINTS "${_site_packages}/nvidia/nccl/lib" ${CUDAToolkit_LIBRARY_DIR} NO_DEFAULT_PATH)
  find_path(MEGATRON_NCCL_INCLUDE_DIR nccl.h
            HINTS "${_site_packages}/nvidia/nccl/include" ${CUDAToolkit_INCLUDE_DIRS} NO_DEFAULT_PATH)
  if(MEGATRON_NCCL_LIBRARY AND MEGATRON_NCCL_INCLUDE_DIR)
    set(MEGATRON_NCCL_FOUND TRUE)
    add_library(megatron_nccl SHARED IMPORTED GLOBAL)
    set_target_properties(megatron_nccl PROPERTIES
      IMPORTED_LOCATION "${MEGATRON_NCCL_LIBRARY}"
      IMPORTED_NO_SONAME FALSE
      INTERFACE_INCLUDE_DIRECTORIES "${MEGATRON_NCCL_INCLUDE_DIR}")
  endif()
endif()
