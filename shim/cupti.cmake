# CUPTI tracing sources of the shim, used when the CUDA toolkit's cupti.h is
# present (libcupti itself is loaded at run time, never linked).
find_path(TPA_CUPTI_HEADER_DIR cupti.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{CUDA_HOME}/include $ENV{CUDA_HOME}/extras/CUPTI/include
        /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include)
if(TPA_CUPTI_HEADER_DIR)
  set(TPA_CUPTI_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/cupti_trace.c ${CMAKE_CURRENT_SOURCE_DIR}/cupti_api.c
      ${CMAKE_CURRENT_SOURCE_DIR}/cupti_translate.c ${CMAKE_CURRENT_SOURCE_DIR}/cupti_policy.c ${CMAKE_CURRENT_SOURCE_DIR}/cupti_oom.c)
  set(TPA_CUPTI_INCLUDE_DIRS ${TPA_CUPTI_HEADER_DIR})
  get_filename_component(tpa_cuda_root ${TPA_CUPTI_HEADER_DIR} DIRECTORY)
  if(EXISTS ${tpa_cuda_root}/targets/x86_64-linux/include/cuda.h)
    list(APPEND TPA_CUPTI_INCLUDE_DIRS ${tpa_cuda_root}/targets/x86_64-linux/include)
  endif()
endif()
