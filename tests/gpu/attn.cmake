# balexec's attention kernels (executor/attn.cu, executor/README.md "Attention kernels"): the
# GPU correctness test and the timing program. include()d from tests/CMakeLists.txt only when
# CUDA is available (BP_HAVE_CUDA); balplan_attn comes from the top-level CMakeLists.txt.
# bp_errorf lives in balplan_core, hence the second library (after balplan_attn on the link
# line).
add_executable(test_attention ${CMAKE_SOURCE_DIR}/tests/gpu/test_attention.cu)
target_link_libraries(test_attention PRIVATE balplan_attn balplan_core)
add_test(NAME gpu/attention COMMAND test_attention)
set_tests_properties(gpu/attention PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" LABELS gpu
  SKIP_RETURN_CODE 77 TIMEOUT 300)

# Not a test: run by hand through tools/bench/bench-attn BUILD_DIR, which expects it at the
# top of the build directory like the other benchmarks.
add_executable(bench_attn ${CMAKE_SOURCE_DIR}/tools/bench/bench_attn.cu)
target_link_libraries(bench_attn PRIVATE balplan_attn balplan_core)
set_target_properties(bench_attn PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

# The block-sparse (MoBA top-k) kernels (executor/attn_sparse.cu) against the float64 CPU
# reference (executor/attn_sparse_ref.c) and the dense kernel; `--time` adds the (x, k)
# timing table (tools/gpu-run runs it).
add_executable(test_sparse_attention ${CMAKE_SOURCE_DIR}/tests/gpu/test_sparse_attention.cu)
target_link_libraries(test_sparse_attention PRIVATE balplan_attn balplan_attn_ref balplan_core)
add_test(NAME gpu/sparse-attention COMMAND test_sparse_attention)
set_tests_properties(gpu/sparse-attention PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" LABELS gpu
  SKIP_RETURN_CODE 77 TIMEOUT 300 RESOURCE_LOCK balplan-gpu)
