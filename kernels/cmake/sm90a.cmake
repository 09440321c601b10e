# tprt_sm90a_objects(NAME INTO TARGET SOURCES ... INCLUDES ...): the CUDA sources built for sm_90a
# alone (Hopper's wgmma needs the arch-specific target), whatever CMAKE_CUDA_ARCHITECTURES says, as an
# object library NAME whose objects join TARGET; with nvcc's warnings as errors, as tprt's CUDA code.
function(tprt_sm90a_objects name)
  cmake_parse_arguments(ARG "" "INTO" "SOURCES;INCLUDES" ${ARGN})
  add_library(${name} OBJECT ${ARG_SOURCES})
  set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
  set_property(TARGET ${name} PROPERTY COMPILE_OPTIONS "") # the directory's host-compiler flags
  target_compile_options(${name} PRIVATE --generate-code=arch=compute_90a,code=sm_90a
    -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror)
  target_include_directories(${name} PRIVATE ${ARG_INCLUDES})
  target_sources(${ARG_INTO} PRIVATE $<TARGET_OBJECTS:${name}>)
endfunction()
