# mhla_add_test: the one way a test is declared in this tree.
#
#   mhla_add_test(NAME <module>.<test>[.<variant>]
#                 [QUICK]                       # in the quick tier (see below)
#                 [LABELS <label>...]           # extra labels (python, sim, gpu, ...)
#                 [REQUIRES <variable>...]      # registered only when each is true
#                 [TIMEOUT <s>] [PROCESSORS <n>] [SKIP_RETURN_CODE <rc>]
#                 [FIXTURES_SETUP <f>...] [FIXTURES_REQUIRED <f>...]
#                 [ENVIRONMENT <VAR=value>...] [WORKING_DIRECTORY <dir>]
#                 COMMAND <program> [<arg>...])
#
# The name says where a test belongs: its first dot-separated part is the module
# (engine, kvstate, tokenizer, grammar, server, client, train, cuda, fuzz, style, docs),
# the rest is the test and, after a second dot, its variant
# (engine.batch_independence.gqa). Every test is labelled with its module and its
# tier, so that
#   ctest -L engine      runs every engine test (each module the same way);
#   ctest -L quick       runs the quick tier: the edit-compile-test loop, under
#                        two minutes in all with -j2 on a 2-core machine;
#   ctest -L slow        runs the rest;
#   ctest                runs everything: the full set, what CI runs.
# A test goes into the quick tier (QUICK) when it takes seconds, not minutes;
# fixtures it requires must be quick too, since ctest runs them with it.
#
# REQUIRES names variables that must be true for the test to exist in this
# build (MHLA_NODE, MHLA_HAVE_CUDA, ...). A test whose requirement is missing
# is not registered; its name is written to tests-absent.txt in the build
# folder with the variable that was missing, so that the check of the module
# READMEs' test tables (tests/docs/check_test_tables.py) can tell a test that
# this build lacks from one that does not exist.
#
# The command runs as add_test(NAME ... COMMAND ...) runs it: a target name
# as the program means that target's binary; generator expressions work.

set(MHLA_TEST_MODULES base engine kvstate tokenizer template grammar server client train cuda fuzz style docs deploy fault)
set(MHLA_TESTS_ABSENT_FILE ${CMAKE_BINARY_DIR}/tests-absent.txt)
file(WRITE ${MHLA_TESTS_ABSENT_FILE} "")

function(mhla_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 T "QUICK"
    "NAME;TIMEOUT;PROCESSORS;SKIP_RETURN_CODE;WORKING_DIRECTORY"
    "LABELS;REQUIRES;FIXTURES_SETUP;FIXTURES_REQUIRED;ENVIRONMENT;COMMAND")
  if(T_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mhla_add_test(${T_NAME}): unknown arguments ${T_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT T_NAME OR NOT T_COMMAND)
    message(FATAL_ERROR "mhla_add_test: NAME and COMMAND are required")
  endif()
  if(NOT T_NAME MATCHES "^([a-z0-9]+)\\.[a-z0-9_]+(\\.[a-z0-9_]+)?$")
    message(FATAL_ERROR "mhla_add_test: '${T_NAME}' is not module.test[.variant] "
                        "(lower case, digits and _ in each part)")
  endif()
  set(module ${CMAKE_MATCH_1})
  if(NOT module IN_LIST MHLA_TEST_MODULES)
    message(FATAL_ERROR "mhla_add_test: '${T_NAME}': module '${module}' is not one of "
                        "${MHLA_TEST_MODULES} (cmake/MhlaTest.cmake)")
  endif()

  foreach(req ${T_REQUIRES})
    if(NOT ${req})
      file(APPEND ${MHLA_TESTS_ABSENT_FILE} "${T_NAME} ${req}\n")
      return()
    endif()
  endforeach()

  if(T_WORKING_DIRECTORY)
    add_test(NAME ${T_NAME} COMMAND ${T_COMMAND} WORKING_DIRECTORY ${T_WORKING_DIRECTORY})
  else()
    add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  endif()

  if(T_QUICK)
    set(tier quick)
  else()
    set(tier slow)
  endif()
  set(labels ${module} ${tier} ${T_LABELS})
  list(REMOVE_DUPLICATES labels)
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${labels}")
  foreach(prop TIMEOUT PROCESSORS SKIP_RETURN_CODE)
    if(DEFINED T_${prop})
      set_tests_properties(${T_NAME} PROPERTIES ${prop} ${T_${prop}})
    endif()
  endforeach()
  foreach(prop FIXTURES_SETUP FIXTURES_REQUIRED ENVIRONMENT)
    if(T_${prop})
      set_tests_properties(${T_NAME} PROPERTIES ${prop} "${T_${prop}}")
    endif()
  endforeach()
endfunction()
