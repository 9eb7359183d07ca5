# LibTorch from a Python environment's `torch` package (PyPI's wheel), the
# second supported build: -DINFERGATE_TORCH_PYTHON=/path/to/venv/bin/python3
# builds infergate against the LibTorch inside that interpreter's torch
# (today's PyTorch, tests/pypi/run.sh), everything else from Debian's
# packages as in the default build, which uses Debian 13's libtorch-dev.
#
# The package is described here directly rather than through the wheel's
# own CMake files: those (2.11 to 2.15) define protobuf::libprotobuf with no
# library, so infergate's generated code would link no protobuf; they find
# Debian's libc10.so (2.6) before the wheel's; and they require a CUDA
# compiler, which infergate does not use (it reaches the GPU through
# LibTorch's device-generic API only).
#
# A CUDA wheel's libtorch_cuda and libc10_cuda are linked with
# --no-as-needed: nothing in infergate names their symbols, and the CUDA
# backend registers itself when they load. The build tree's RPATH names the
# wheel's lib folder, whose libraries find the NVIDIA packages' own.
#
# libstdc++ is named before LibTorch's libraries, so the server lists it
# first among the libraries it needs and the dynamic loader finds the C++
# library's functions there: the wheel's libraries carry private copies
# of some (libtorch_cpu's std::filesystem, with no symbol versions, which
# satisfy any versioned reference), and a server that found those first
# called them (torch 2.11's remove_all jumped to address 0). tests/pypi/run.sh
# checks every binding of the server's.
#
# Defines the imported target `torch` and Torch_VERSION, as
# find_package(Torch) does.
function(infergate_torch_from_python python)
  execute_process(
    COMMAND "${python}" -c "import os, torch\nprint(os.path.dirname(torch.__file__))\nprint(torch.__version__.split('+')[0])\nprint(int(torch.compiled_with_cxx11_abi()))\nprint(torch.version.cuda or '')"
    OUTPUT_VARIABLE answer ERROR_VARIABLE error RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "INFERGATE_TORCH_PYTHON=${python} cannot import torch: ${error}")
  endif()
  string(REPLACE "\n" ";" answer "${answer}")
  list(GET answer 0 dir)
  list(GET answer 1 version)
  list(GET answer 2 cxx11_abi)
  list(LENGTH answer fields)
  set(cuda "")
  if(fields GREATER 3)
    list(GET answer 3 cuda)
  endif()
  set(libs "")
  foreach(lib torch_cuda c10_cuda)
    if(EXISTS "${dir}/lib/lib${lib}.so")
      list(APPEND libs "${dir}/lib/lib${lib}.so")
    endif()
  endforeach()
  if(cuda AND NOT libs)
    message(FATAL_ERROR "torch ${version} at ${dir} says CUDA ${cuda} but has no lib/libtorch_cuda.so")
  endif()
  foreach(lib torch torch_cpu c10)
    if(NOT EXISTS "${dir}/lib/lib${lib}.so")
      message(FATAL_ERROR "torch ${version} at ${dir} has no lib/lib${lib}.so: not a LibTorch to build against")
    endif()
    list(APPEND libs "${dir}/lib/lib${lib}.so")
  endforeach()
  add_library(torch INTERFACE IMPORTED GLOBAL)
  set_target_properties(torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${dir}/include;${dir}/include/torch/csrc/api/include"
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${cxx11_abi}"
    INTERFACE_LINK_LIBRARIES "-Wl,--push-state,--no-as-needed;-lstdc++;${libs};-Wl,--pop-state")
  set(Torch_VERSION "${version}" PARENT_SCOPE)
  set(Torch_DIR "${dir}" PARENT_SCOPE)
  if(cuda)
    message(STATUS "LibTorch ${version} (CUDA ${cuda}) from ${dir}")
  else()
    message(STATUS "LibTorch ${version} (CPU only) from ${dir}")
  endif()
endfunction()
