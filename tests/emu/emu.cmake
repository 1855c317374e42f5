# The attention kernels' tests on a CPU emulation of the CUDA they use (tests/emu/README.md),
# label emu. include()d from tests/CMakeLists.txt in every build, CUDA or not: the kernels
# (executor/attn.cu, executor/attn_sparse.cu, and the tile header both include,
# executor/attn_tile.cuh) and their GPU tests (tests/gpu/*.cu, --small) go unchanged through
# emu_prep and a C++17 compiler, against the emulator's headers
# (tests/emu/include, first on the include path) and runtime.
include(CheckLanguage)
check_language(CXX)
if(NOT CMAKE_CXX_COMPILER)
  message(WARNING "balplan: no C++ compiler: the emulated kernel tests (label emu) are not "
    "built (tools/deps installs g++)")
  return()
endif()
enable_language(CXX)

set(BP_EMU_DIR ${CMAKE_CURRENT_LIST_DIR})
set(BP_EMU_GEN ${CMAKE_CURRENT_BINARY_DIR}/emu)
file(MAKE_DIRECTORY ${BP_EMU_GEN})

# The source step (plain C, a build tool).
add_executable(emu_prep ${BP_EMU_DIR}/emu_prep.c)

# Each .cu becomes NAME.cu.cc (what the compiler reads) and NAME.cu.sites (its barriers, for
# test-barrier-drop --survey). The tile header both kernel files include
# (executor/attn_tile.cuh: the tile steps, with their __syncwarp, shuffles and WMMA calls) goes
# the same way to attn_tile.cuh beside them, which their #include "attn_tile.cuh" finds first
# (a quoted include looks in the including file's folder, the build's, whatever #line says).
foreach(cu executor/attn.cu executor/attn_sparse.cu executor/attn_tile.cuh
    tests/gpu/test_attention.cu tests/gpu/test_sparse_attention.cu tests/emu/emu_checks.cu)
  get_filename_component(name ${cu} NAME)
  set(out ${BP_EMU_GEN}/${name}.cc)
  if(name MATCHES "[.]cuh$")
    set(out ${BP_EMU_GEN}/${name})
  endif()
  add_custom_command(OUTPUT ${out} ${BP_EMU_GEN}/${name}.sites
    COMMAND emu_prep --sites ${BP_EMU_GEN}/${name}.sites ${CMAKE_SOURCE_DIR}/${cu} ${out}
    DEPENDS emu_prep ${CMAKE_SOURCE_DIR}/${cu}
    COMMENT "emu_prep ${cu}"
    VERBATIM)
endforeach()

# The tile's sm_80 instructions (executor/attn_ptx.cuh, inline PTX) on the emulator's models:
# tests/emu/attn_ptx.cuh, copied beside the prepared attn_tile.cuh, whose #include
# "attn_ptx.cuh" finds it there before executor/ (and so does emu_checks.cu.cc's). A target of
# its own, which the prepared targets depend on, makes the copy once (Make runs a custom
# command listed by several targets once in each, and these build in parallel).
add_custom_command(OUTPUT ${BP_EMU_GEN}/attn_ptx.cuh
  COMMAND ${CMAKE_COMMAND} -E copy ${BP_EMU_DIR}/attn_ptx.cuh ${BP_EMU_GEN}/attn_ptx.cuh
  DEPENDS ${BP_EMU_DIR}/attn_ptx.cuh
  COMMENT "emulated attn_ptx.cuh"
  VERBATIM)
add_custom_target(emu_attn_ptx DEPENDS ${BP_EMU_GEN}/attn_ptx.cuh)

# -O2 in every build type, the Debug (ASan) one included: unoptimised, the emulated tests
# take several times longer. -fno-strict-aliasing: the kernels move bf16 rows as uint4,
# which nvcc allows and C++'s aliasing rules do not. #pragma unroll is nvcc's.
set(BP_EMU_OPTS -O2 -fno-strict-aliasing -Wall -Wextra -Wno-unknown-pragmas)
if(BALPLAN_WERROR)
  list(APPEND BP_EMU_OPTS -Werror)
endif()

add_library(balplan_emu STATIC ${BP_EMU_DIR}/fiber.cpp ${BP_EMU_DIR}/sched.cpp
  ${BP_EMU_DIR}/runtime.cpp)
target_include_directories(balplan_emu PUBLIC ${BP_EMU_DIR}/include)

# (the prepared header is listed so that it is made before the files that include it)
add_library(balplan_emu_attn STATIC ${BP_EMU_GEN}/attn.cu.cc ${BP_EMU_GEN}/attn_sparse.cu.cc
  ${BP_EMU_GEN}/attn_tile.cuh)
target_include_directories(balplan_emu_attn PUBLIC ${CMAKE_SOURCE_DIR}/executor ${BP_PLANNER_INC})
target_link_libraries(balplan_emu_attn PUBLIC balplan_emu balplan_core)

add_executable(emu_test_attention ${BP_EMU_GEN}/test_attention.cu.cc)
target_include_directories(emu_test_attention PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu)
target_link_libraries(emu_test_attention PRIVATE balplan_emu_attn balplan_core)

add_executable(emu_test_sparse_attention ${BP_EMU_GEN}/test_sparse_attention.cu.cc)
target_include_directories(emu_test_sparse_attention PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu)
target_link_libraries(emu_test_sparse_attention PRIVATE balplan_emu_attn balplan_attn_ref
  balplan_core)

add_executable(emu_checks ${BP_EMU_GEN}/emu_checks.cu.cc)
target_link_libraries(emu_checks PRIVATE balplan_emu)
if(BALPLAN_SANITIZE)
  target_compile_definitions(emu_checks PRIVATE EMU_SANITIZE) # its ASan and UBSan cases
endif()

foreach(t balplan_emu_attn emu_test_attention emu_test_sparse_attention emu_checks)
  add_dependencies(${t} emu_attn_ptx)
endforeach()

foreach(t balplan_emu balplan_emu_attn emu_test_attention emu_test_sparse_attention emu_checks)
  target_compile_options(${t} PRIVATE ${BP_EMU_OPTS})
  set_target_properties(${t} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
    CXX_EXTENSIONS OFF)
endforeach()

# The kernel tests under three schedules (sched.cpp): mixed gives the blocks of every launch
# each of the six orders in turn; first and last run the lowest (highest) thread as far
# ahead as it can get, for every block. TIMEOUTs are generous: a slow machine must not fail.
foreach(s mixed first last)
  set(suffix "")
  if(NOT s STREQUAL "mixed")
    set(suffix "-${s}")
  endif()
  add_test(NAME emu/attention${suffix} COMMAND emu_test_attention --small)
  add_test(NAME emu/sparse-attention${suffix} COMMAND emu_test_sparse_attention --small)
  set_tests_properties(emu/attention${suffix} emu/sparse-attention${suffix} PROPERTIES
    ENVIRONMENT "${BP_TEST_ENV};EMU_SCHEDULE=${s}" LABELS emu TIMEOUT 600)
endforeach()

# The kernel tests must fail with a barrier removed (and the emulator's own checks work).
add_test(NAME emu/barrier-drop COMMAND ${BP_EMU_DIR}/test-barrier-drop
  $<TARGET_FILE:emu_test_attention> $<TARGET_FILE:emu_test_sparse_attention>)
add_test(NAME emu/checks COMMAND emu_checks $<TARGET_FILE:emu_prep>)
set_tests_properties(emu/barrier-drop emu/checks PROPERTIES ENVIRONMENT "${BP_TEST_ENV}"
  LABELS emu TIMEOUT 600)
