# The server's memory allocator. jemalloc (Debian's libjemalloc) by default:
# a request's buffers are allocated on one thread (the front end's) and
# freed on another (a device worker's), or the other way round for its
# answer, and glibc's malloc takes the owning arena's lock for every such
# free; in profiles of a small model the threads woke each other on those
# locks (futex wakes from malloc's arena locks, about 5% of the server's
# CPU, and the context switches after them). jemalloc frees into the
# freeing thread's cache. Measured with bench/compare.sh (docs/benchmarks.md).
#
# INFERGATE_ALLOCATOR: jemalloc (the default) or system. Builds with a
# sanitizer in CMAKE_CXX_FLAGS (-fsanitize=...: AddressSanitizer,
# ThreadSanitizer, the fuzzer) keep the system's: the sanitizer replaces
# malloc itself.
#
#   infergate_link_allocator(TARGET)   links TARGET (an executable) with it
#
# INFERGATE_ALLOCATOR_IN_USE says which one the server links ("jemalloc" or
# "system"), for the tests that check the running server says the same.
set(INFERGATE_ALLOCATOR "jemalloc" CACHE STRING "The server's allocator: jemalloc or system")
set_property(CACHE INFERGATE_ALLOCATOR PROPERTY STRINGS jemalloc system)
if(NOT INFERGATE_ALLOCATOR MATCHES "^(jemalloc|system)$")
  message(FATAL_ERROR "INFERGATE_ALLOCATOR is jemalloc or system, not '${INFERGATE_ALLOCATOR}'")
endif()

set(INFERGATE_ALLOCATOR_IN_USE "${INFERGATE_ALLOCATOR}")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=")
  set(INFERGATE_ALLOCATOR_IN_USE "system")
endif()
if(INFERGATE_ALLOCATOR_IN_USE STREQUAL "jemalloc")
  find_library(INFERGATE_JEMALLOC_LIBRARY NAMES jemalloc)
  if(NOT INFERGATE_JEMALLOC_LIBRARY)
    message(FATAL_ERROR "jemalloc not found: install Debian's libjemalloc-dev (deploy/packages.txt), "
                        "or configure with -DINFERGATE_ALLOCATOR=system")
  endif()
endif()
message(STATUS "infergate's allocator: ${INFERGATE_ALLOCATOR_IN_USE}")

function(infergate_link_allocator target)
  if(INFERGATE_ALLOCATOR_IN_USE STREQUAL "jemalloc")
    # A library the executable itself needs, ahead of the C library: its
    # malloc is the one every library in the process resolves (LibTorch's
    # and gRPC's included). The server checks that it is (common/
    # process_allocator.h).
    target_link_libraries(${target} PRIVATE "${INFERGATE_JEMALLOC_LIBRARY}")
  endif()
endfunction()
