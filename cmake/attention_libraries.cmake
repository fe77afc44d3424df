# The attention libraries attntune offers as CUDA implementations (kernels/cuda/libraries),
# each built when its headers are found, as CUDA is (scripts/install-deps.sh installs
# them from PyPI where nvcc is):
# - cuDNN's SDPA: the cuDNN frontend's headers (nvidia-cudnn-frontend) and cuDNN's own
#   (nvidia-cudnn-cu13, else the CUDA toolkit's); libcudnn is loaded at run time, never
#   linked;
# - FlashInfer: not built yet; listed as absent with that reason.
# Sets ATTNTUNE_HAVE_CUDNN (ATTNTUNE_HAVE_FLASHINFER stays OFF), their paths, the reason when absent
# (ATTNTUNE_CUDNN_ABSENT / ATTNTUNE_FLASHINFER_ABSENT, which `attntune variants` prints)
# and ATTNTUNE_LIBRARY_VERSIONS (part of the build identity, cmake/build_info.cmake).
option(ATTNTUNE_CUDNN "Build cuDNN's SDPA as a CUDA implementation when its headers are found" ON)

set(ATTNTUNE_HAVE_CUDNN OFF)
set(ATTNTUNE_HAVE_FLASHINFER OFF)
set(ATTNTUNE_LIBRARY_VERSIONS "")
set(ATTNTUNE_CUDNN_ABSENT "this attntune was built with -DATTNTUNE_CUDNN=OFF")
set(ATTNTUNE_FLASHINFER_ABSENT "attntune does not build FlashInfer's kernels yet (their exact dense/swa/decode masks are planned in kernels/cuda/libraries/library_plan.h)")

if(ATTNTUNE_HAVE_CUDA AND ATTNTUNE_CUDNN)
  # Where pip put them: the site-packages of the python3 that install-deps.sh ran.
  set(_sites "")
  find_program(ATTNTUNE_PYTHON3 python3)
  if(ATTNTUNE_PYTHON3)
    execute_process(
      COMMAND ${ATTNTUNE_PYTHON3} -c
        "import site, sysconfig; p = sysconfig.get_paths(); print(';'.join(dict.fromkeys([p['purelib'], p['platlib']] + site.getsitepackages() + [site.getusersitepackages()])))"
      OUTPUT_VARIABLE _sites OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  set(_cudnn_include_hints "")
  set(_cudnn_lib_hints "")
  foreach(site IN LISTS _sites)
    list(APPEND _cudnn_include_hints ${site}/include ${site}/nvidia/cudnn/include)
    list(APPEND _cudnn_lib_hints ${site}/nvidia/cudnn/lib)
  endforeach()

  if(ATTNTUNE_CUDNN)
    find_path(ATTNTUNE_CUDNN_FRONTEND_INCLUDE cudnn_frontend.h HINTS ${_cudnn_include_hints})
    find_path(ATTNTUNE_CUDNN_INCLUDE cudnn_version.h
      HINTS ${_cudnn_include_hints} ${CUDAToolkit_INCLUDE_DIRS})
    find_file(ATTNTUNE_CUDNN_BUILD_LIBRARY libcudnn.so.9
      HINTS ${_cudnn_lib_hints} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
    if(ATTNTUNE_CUDNN_FRONTEND_INCLUDE AND ATTNTUNE_CUDNN_INCLUDE)
      file(STRINGS ${ATTNTUNE_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend_version.h _fe
        REGEX "define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION")
      string(REGEX REPLACE "[^0-9;]" "" _fe "${_fe}")
      string(REPLACE ";" "." _fe "${_fe}")
      file(STRINGS ${ATTNTUNE_CUDNN_INCLUDE}/cudnn_version.h _cudnn
        REGEX "define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
      string(REGEX REPLACE "[^0-9;]" "" _cudnn "${_cudnn}")
      string(REPLACE ";" "." _cudnn "${_cudnn}")
      set(ATTNTUNE_HAVE_CUDNN ON)
      string(APPEND ATTNTUNE_LIBRARY_VERSIONS "cudnn-frontend ${_fe}, cudnn headers ${_cudnn}; ")
      message(STATUS "attntune: cuDNN frontend ${_fe} (cuDNN ${_cudnn} headers) found: "
                     "cudnn implementations enabled (libcudnn loaded at run time)")
    else()
      set(ATTNTUNE_CUDNN_ABSENT "the cuDNN frontend's headers (cudnn_frontend.h) or cuDNN's (cudnn_version.h) were not found at configure time: pip install nvidia-cudnn-frontend nvidia-cudnn-cu13 (scripts/install-deps.sh does)")
      message(STATUS "attntune: cuDNN frontend not found; cudnn implementations not built")
    endif()
  endif()

endif()
if(NOT ATTNTUNE_HAVE_CUDA)
  set(ATTNTUNE_CUDNN_ABSENT "this attntune was built without the CUDA toolkit")
  set(ATTNTUNE_FLASHINFER_ABSENT "this attntune was built without the CUDA toolkit")
endif()
