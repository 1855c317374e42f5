# gpu/balprof: the measuring profiler on one GPU (tests/gpu/test-balprof: --quick, read back,
# resume, a foreign state refused). Included from tests/CMakeLists.txt when CUDA is built;
# skips (77) where no GPU is present.
add_test(NAME gpu/balprof
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test-balprof $<TARGET_FILE:balplan> $<TARGET_FILE:balprof>)
set_tests_properties(gpu/balprof PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" LABELS gpu
  SKIP_RETURN_CODE 77 TIMEOUT 300 RESOURCE_LOCK balplan-gpu)
