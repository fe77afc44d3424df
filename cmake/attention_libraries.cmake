# The attention libraries attntune offers as CUDA implementations (kernels/cuda/libraries),
# each built when its headers are found, as CUDA is (scripts/install-deps.sh installs
# them from PyPI where nvcc is):
# - cuDNN's SDPA: the cuDNN frontend's headers (nvidia-cudnn-frontend) and cuDNN's own
#   (nvidia-cudnn-cu13, else the CUDA toolkit's); libcudnn is loaded at run time, never
#   linked;
# - FlashInfer: its headers (flashinfer-python's flashinfer/data/include, with the CUTLASS
#   and CCCL it bundles); header-only, its templates instantiated in attntune's own .cu
#   files (kernels/cuda/libraries/flashinfer_*.cu).
# Sets ATTNTUNE_HAVE_CUDNN and ATTNTUNE_HAVE_FLASHINFER, their paths, the reason when absent
# (ATTNTUNE_CUDNN_ABSENT / ATTNTUNE_FLASHINFER_ABSENT, which `attntune variants` prints)
# and ATTNTUNE_LIBRARY_VERSIONS (part of the build identity, cmake/build_info.cmake).
option(ATTNTUNE_CUDNN "Build cuDNN's SDPA as a CUDA implementation when its headers are found" ON)
option(ATTNTUNE_FLASHINFER "Build FlashInfer's kernels as a CUDA implementation when its headers are found" ON)

set(ATTNTUNE_HAVE_CUDNN OFF)
set(ATTNTUNE_HAVE_FLASHINFER OFF)
set(ATTNTUNE_LIBRARY_VERSIONS "")
set(ATTNTUNE_CUDNN_ABSENT "this attntune was built with -DATTNTUNE_CUDNN=OFF")
set(ATTNTUNE_FLASHINFER_ABSENT "this attntune was built with -DATTNTUNE_FLASHINFER=OFF")

if(ATTNTUNE_HAVE_CUDA AND (ATTNTUNE_CUDNN OR ATTNTUNE_FLASHINFER))
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

  if(ATTNTUNE_FLASHINFER)
    set(_fi_hints "")
    foreach(site IN LISTS _sites)
      list(APPEND _fi_hints ${site}/flashinfer/data/include)
    endforeach()
    find_path(ATTNTUNE_FLASHINFER_INCLUDE flashinfer/attention/prefill.cuh HINTS ${_fi_hints})
    if(ATTNTUNE_FLASHINFER_INCLUDE AND EXISTS ${ATTNTUNE_FLASHINFER_INCLUDE}/flashinfer/attention/decode.cuh)
      get_filename_component(_fi_data ${ATTNTUNE_FLASHINFER_INCLUDE} DIRECTORY)
      # Its bundled CCCL goes ahead of the toolkit's (its headers need the newer one).
      set(ATTNTUNE_FLASHINFER_INCLUDES ${_fi_data}/cccl/libcudacxx/include ${_fi_data}/cccl/cub
          ${_fi_data}/cccl/thrust ${ATTNTUNE_FLASHINFER_INCLUDE})
      set(_fi_version "unknown")
      get_filename_component(_fi_pkg ${_fi_data} DIRECTORY)
      if(EXISTS ${_fi_pkg}/_build_meta.py)
        file(STRINGS ${_fi_pkg}/_build_meta.py _fi_line REGEX "^__version__")
        string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" _fi_version "${_fi_line}")
      endif()
      set(ATTNTUNE_FLASHINFER_VERSION ${_fi_version})
      set(ATTNTUNE_HAVE_FLASHINFER ON)
      string(APPEND ATTNTUNE_LIBRARY_VERSIONS "flashinfer ${_fi_version}; ")
      message(STATUS "attntune: FlashInfer ${_fi_version} headers found: flashinfer implementations enabled")
    else()
      set(ATTNTUNE_FLASHINFER_ABSENT "FlashInfer's headers (flashinfer/attention/prefill.cuh) were not found at configure time: pip install --no-deps flashinfer-python (scripts/install-deps.sh does)")
      message(STATUS "attntune: FlashInfer headers not found; flashinfer implementations not built")
    endif()
  endif()
endif()
if(NOT ATTNTUNE_HAVE_CUDA)
  set(ATTNTUNE_CUDNN_ABSENT "this attntune was built without the CUDA toolkit")
  set(ATTNTUNE_FLASHINFER_ABSENT "this attntune was built without the CUDA toolkit")
endif()
