# Finds monoflow's dependencies: LibTorch (from the Python torch wheel), CUDA (optional),
# yaml-cpp, libsndfile, soxr, CLI11, stb, espeak-ng (optional), cpp-httplib (optional: serve), GoogleTest.
# MONOFLOW_DEPS_PREFIX: an extra prefix with unpacked .deb packages (usr/include, usr/lib/...),
# used on machines without a package manager (the GPU machine).

set(MONOFLOW_DEPS_PREFIX "" CACHE PATH "Folder with unpacked dependency packages (dpkg -x)")
if(MONOFLOW_DEPS_PREFIX)
  list(APPEND CMAKE_PREFIX_PATH "${MONOFLOW_DEPS_PREFIX}/usr" "${MONOFLOW_DEPS_PREFIX}/usr/lib/x86_64-linux-gnu")
  include_directories(SYSTEM "${MONOFLOW_DEPS_PREFIX}/usr/include")
endif()

# --- LibTorch, located through the Python package: torch.utils.cmake_prefix_path.
# Asked once and cached (a re-configure must not lose it); -DTorch_DIR=... with
# -DMONOFLOW_TORCH_CUDA=<version or empty> bypasses Python.
if(NOT DEFINED CACHE{MONOFLOW_TORCH_CUDA})
  find_program(MONOFLOW_PYTHON NAMES python3 python
               HINTS "${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin" NO_DEFAULT_PATH)
  if(NOT MONOFLOW_PYTHON)
    find_program(MONOFLOW_PYTHON NAMES python3 python)
  endif()
  execute_process(
    COMMAND "${MONOFLOW_PYTHON}" -c
            "import torch; print(torch.utils.cmake_prefix_path + ';' + (torch.version.cuda or ''), end='')"
    OUTPUT_VARIABLE _torch_query RESULT_VARIABLE _torch_rc ERROR_QUIET)
  if(NOT _torch_rc EQUAL 0)
    if(NOT Torch_DIR)
      message(FATAL_ERROR "monoflow: '${MONOFLOW_PYTHON}' cannot import torch. Run scripts/setup.sh, "
                          "or pass -DMONOFLOW_PYTHON=/path/to/python-with-torch or -DTorch_DIR=...")
    endif()
    set(_torch_query ";")
  endif()
  list(GET _torch_query 0 _prefix)
  list(GET _torch_query 1 _cuda)
  set(MONOFLOW_TORCH_PREFIX "${_prefix}" CACHE INTERNAL "torch.utils.cmake_prefix_path")
  set(MONOFLOW_TORCH_CUDA "${_cuda}" CACHE INTERNAL "torch.version.cuda")
endif()
if(MONOFLOW_TORCH_PREFIX)
  list(APPEND CMAKE_PREFIX_PATH "${MONOFLOW_TORCH_PREFIX}")
endif()

# --- CUDA: on when asked for, nvcc exists and torch was built with CUDA.
set(MONOFLOW_CUDA_ENABLED OFF)
if(MONOFLOW_WITH_CUDA AND MONOFLOW_TORCH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)  # H100 / H200
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(MONOFLOW_CUDA_ENABLED ON)
  endif()
endif()
if(NOT MONOFLOW_CUDA_ENABLED)
  # A CUDA torch still needs the toolkit's headers to be found; without nvcc, tell Caffe2 not to look.
  set(CAFFE2_USE_CUDNN OFF)
endif()

if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
find_package(Torch REQUIRED)
find_package(Threads REQUIRED)

# --- yaml-cpp
find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  set(MONOFLOW_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(MONOFLOW_YAML_TARGET yaml-cpp)
endif()

# --- libsndfile and soxr (found by header and library, works with unpacked .debs too)
find_path(SNDFILE_INCLUDE_DIR sndfile.h REQUIRED)
find_library(SNDFILE_LIBRARY NAMES sndfile REQUIRED)
add_library(monoflow_sndfile INTERFACE)
target_include_directories(monoflow_sndfile SYSTEM INTERFACE ${SNDFILE_INCLUDE_DIR})
target_link_libraries(monoflow_sndfile INTERFACE ${SNDFILE_LIBRARY})

find_path(SOXR_INCLUDE_DIR soxr.h REQUIRED)
find_library(SOXR_LIBRARY NAMES soxr REQUIRED)
add_library(monoflow_soxr INTERFACE)
target_include_directories(monoflow_soxr SYSTEM INTERFACE ${SOXR_INCLUDE_DIR})
target_link_libraries(monoflow_soxr INTERFACE ${SOXR_LIBRARY})

# --- header-only: CLI11, stb
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
find_path(STB_INCLUDE_DIR stb_image_write.h PATH_SUFFIXES stb REQUIRED)

# --- espeak-ng (optional: phonemes and the default-corpus generator)
set(MONOFLOW_ESPEAK_ENABLED OFF)
if(MONOFLOW_WITH_ESPEAK)
  find_path(ESPEAK_INCLUDE_DIR espeak-ng/speak_lib.h)
  find_library(ESPEAK_LIBRARY NAMES espeak-ng)
  if(ESPEAK_INCLUDE_DIR AND ESPEAK_LIBRARY)
    set(MONOFLOW_ESPEAK_ENABLED ON)
  endif()
endif()

# --- cpp-httplib (serve). Debian's libcpp-httplib-dev is a compiled library whose header must
# see the macros it was built with (TLS, zlib, brotli): pkg-config gives both. Without it,
# serve and its tests are not built.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
set(MONOFLOW_SERVE_ENABLED OFF)
if(HTTPLIB_FOUND)
  add_library(monoflow_httplib INTERFACE)
  target_link_libraries(monoflow_httplib INTERFACE PkgConfig::HTTPLIB)
  set(MONOFLOW_SERVE_ENABLED ON)
endif()

# --- GoogleTest
if(MONOFLOW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# --- One precompiled <torch/torch.h> shared by every C++ target: LibTorch's headers dominate
# compile time (tens of seconds per file on two cores), so they are parsed once.
option(MONOFLOW_PCH "Precompile the LibTorch headers" ON)
add_library(monoflow_torch_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/pch.cpp)
target_link_libraries(monoflow_torch_pch PUBLIC ${TORCH_LIBRARIES})
if(MONOFLOW_PCH)
  target_precompile_headers(monoflow_torch_pch PRIVATE <torch/torch.h>)
endif()

# monoflow_use_torch(target): link LibTorch and reuse the shared precompiled header.
function(monoflow_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  if(MONOFLOW_PCH)
    target_precompile_headers(${target} REUSE_FROM monoflow_torch_pch)
  endif()
endfunction()
