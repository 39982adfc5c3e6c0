# STRATA_CUDA=AUTO|ON|OFF: the CUDA backend plug-in, libstrata-cuda.so.
# AUTO (the default) builds it when the CUDA toolkit (headers and nvcc)
# and NCCL are found, ON insists on them, OFF never looks. The core
# library never links CUDA either way (tests/cuda checks its DT_NEEDED).
# Sets STRATA_HAVE_CUDA, and enables the CUDA language here, at the top
# level, for the .cu examples. Included from the top-level CMakeLists.
set(STRATA_CUDA AUTO CACHE STRING "Build the CUDA backend plug-in: AUTO, ON or OFF")
set_property(CACHE STRATA_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${STRATA_CUDA}" strata_cuda_mode)
if(NOT strata_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "STRATA_CUDA is '${STRATA_CUDA}': use AUTO, ON or OFF")
endif()

set(STRATA_HAVE_CUDA OFF)
if(NOT strata_cuda_mode STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  include(CheckLanguage)
  check_language(CUDA)
  find_path(STRATA_NCCL_INCLUDE_DIR nccl.h
    HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
  find_library(STRATA_NCCL_LIBRARY nccl
    HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR}
      ${CUDAToolkit_LIBRARY_ROOT}/lib)
  set(strata_cuda_missing "")
  if(NOT CUDAToolkit_FOUND)
    list(APPEND strata_cuda_missing
      "the CUDA toolkit (find_package(CUDAToolkit): put nvcc on the PATH or set CUDAToolkit_ROOT)")
  endif()
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND strata_cuda_missing "a CUDA compiler (nvcc; set CMAKE_CUDA_COMPILER)")
  endif()
  if(NOT STRATA_NCCL_INCLUDE_DIR OR NOT STRATA_NCCL_LIBRARY)
    list(APPEND strata_cuda_missing "NCCL (nccl.h and libnccl; set NCCL_HOME)")
  endif()
  if(strata_cuda_missing)
    list(JOIN strata_cuda_missing "; " strata_cuda_why)
    if(strata_cuda_mode STREQUAL "ON")
      message(FATAL_ERROR "STRATA_CUDA=ON, but this machine lacks: ${strata_cuda_why}")
    endif()
    message(STATUS "CUDA backend: not built (STRATA_CUDA=AUTO; missing: ${strata_cuda_why})")
  else()
    set(STRATA_HAVE_CUDA ON)
    file(STRINGS ${STRATA_NCCL_INCLUDE_DIR}/nccl.h strata_nccl_ver
      REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE "[^0-9;]*([0-9]+)[^;]*" "\\1" strata_nccl_ver "${strata_nccl_ver}")
    list(JOIN strata_nccl_ver "." STRATA_NCCL_VERSION)
    # Code for an H200/H100 (sm_90) and PTX that any device from sm_75 on
    # can compile, unless the user chose.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90-real;75-virtual")
    endif()
    enable_language(CUDA)
    message(STATUS "CUDA backend: libstrata-cuda.so (CUDA ${CUDAToolkit_VERSION}, NCCL ${STRATA_NCCL_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  endif()
endif()

# strata_cuda_c_only_flags(): in the calling directory, gives the
# directory's compile options (the house warnings, sanitizers) to C only,
# so nvcc never sees gcc flags, and gives .cu files warnings of their own.
function(strata_cuda_c_only_flags)
  get_directory_property(opts COMPILE_OPTIONS)
  set(c_opts "")
  foreach(o ${opts})
    list(APPEND c_opts "$<$<COMPILE_LANGUAGE:C>:${o}>")
  endforeach()
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${c_opts}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  if(STRATA_WERROR)
    add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>")
  endif()
endfunction()
