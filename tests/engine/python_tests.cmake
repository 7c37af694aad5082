# Python-driven engine tests (numpy reference, checkpoint generator in tests/tools/).
# include()d from a CMakeLists.txt; MHLA_PYTHON (Debian's python3, which has numpy) is set by
# the root CMakeLists.txt. Script paths use CMAKE_CURRENT_LIST_DIR, so this file works
# whichever directory includes it.
#
# Run:   ctest --test-dir build -L python --output-on-failure   (tests engine.exactness,
#        engine.context_limit, engine.bad_checkpoints)
# By hand: /usr/bin/python3 tests/engine/test_exactness.py --bin build/bin --work /tmp/w --keep

set(_mhla_pytests_dir ${CMAKE_CURRENT_LIST_DIR})

# Each of exactness and bad_checkpoints runs two engine processes at a time.
mhla_add_test(NAME engine.exactness LABELS python TIMEOUT 600 PROCESSORS 2
  COMMAND ${MHLA_PYTHON} ${_mhla_pytests_dir}/test_exactness.py
          --bin ${CMAKE_BINARY_DIR}/bin --work ${CMAKE_CURRENT_BINARY_DIR}/work_exactness)

mhla_add_test(NAME engine.context_limit QUICK LABELS python TIMEOUT 600
  COMMAND ${MHLA_PYTHON} ${_mhla_pytests_dir}/test_context_limit.py
          --bin ${CMAKE_BINARY_DIR}/bin --work ${CMAKE_CURRENT_BINARY_DIR}/work_context_limit)

if(MHLA_ASAN_TOOLS)
  set(_mhla_bad_ckpt_exe mhla-generate-asan)
else()
  set(_mhla_bad_ckpt_exe mhla-generate)
endif()
mhla_add_test(NAME engine.bad_checkpoints QUICK LABELS python TIMEOUT 600 PROCESSORS 2
  COMMAND ${MHLA_PYTHON} ${_mhla_pytests_dir}/test_bad_checkpoints.py
          --bin ${CMAKE_BINARY_DIR}/bin --work ${CMAKE_CURRENT_BINARY_DIR}/work_bad_checkpoints
          --exe ${_mhla_bad_ckpt_exe})
