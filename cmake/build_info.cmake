# Generates build_info.h: the tool version and a hash of the kernel sources, so
# that trials measured with changed kernels are never reused (DESIGN.md s4).
file(GLOB_RECURSE ATTNTUNE_KERNEL_SOURCES CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/kernels/*.cpp ${PROJECT_SOURCE_DIR}/kernels/*.h
  ${PROJECT_SOURCE_DIR}/kernels/*.cu ${PROJECT_SOURCE_DIR}/kernels/*.cuh)
list(SORT ATTNTUNE_KERNEL_SOURCES)
set(_hash_input "")
foreach(f IN LISTS ATTNTUNE_KERNEL_SOURCES)
  file(SHA256 ${f} _h)
  file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${f})
  string(APPEND _hash_input "${_rel}:${_h}\n")
endforeach()
# The toolchain's and the attention libraries' versions are part of the identity too: a
# new nvcc, cuDNN frontend or FlashInfer re-measures (the cuDNN loaded at run time is added
# by the tuner, RuntimeLibraries in kernels/variant.h).
string(APPEND _hash_input "nvcc:${CMAKE_CUDA_COMPILER_VERSION}${CUDAToolkit_VERSION}\n")
string(APPEND _hash_input "libraries:${ATTNTUNE_LIBRARY_VERSIONS}\n")
string(SHA256 ATTNTUNE_KERNEL_HASH "${_hash_input}")
string(SUBSTRING ${ATTNTUNE_KERNEL_HASH} 0 16 ATTNTUNE_KERNEL_HASH)
# Re-run configure (and so re-hash) whenever a kernel source changes.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ATTNTUNE_KERNEL_SOURCES})

# Chart.js, inlined into report.html so that the report works offline.
find_file(CHARTJS_FILE NAMES chart.min.js chart.umd.js
  PATHS /usr/share/javascript/chart.js /usr/share/nodejs/chart.js/dist NO_DEFAULT_PATH)
if(NOT CHARTJS_FILE AND NOT ATTNTUNE_LIBRARY_ONLY)
  message(FATAL_ERROR "Chart.js not found: install Debian's libjs-chart.js")
endif()

set(ATTNTUNE_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
configure_file(${PROJECT_SOURCE_DIR}/cmake/build_info.h.in ${ATTNTUNE_GENERATED_DIR}/build_info.h @ONLY)
