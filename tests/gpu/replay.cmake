# gpu/replay-cuda: 1-GPU plans replayed by balexec's CUDA backend (tests/gpu/test-replay-cuda).
# Included from tests/CMakeLists.txt when CUDA is built; skips (77) where no GPU is present.
# One GPU test at a time: they would otherwise share the device and its memory.
add_test(NAME gpu/replay-cuda
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/gpu/test-replay-cuda
          $<TARGET_FILE:balplan> $<TARGET_FILE:balexec>)
set_tests_properties(gpu/replay-cuda PROPERTIES ENVIRONMENT "${BP_TEST_ENV}" LABELS gpu
  SKIP_RETURN_CODE 77 TIMEOUT 300 RESOURCE_LOCK balplan-gpu)
