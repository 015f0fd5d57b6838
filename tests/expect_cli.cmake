# Runs one command line and checks its exit code and output (stdout + stderr):
#   cmake -DCMD=<;-list> -DEXPECT_RC=<n> -DEXPECT_REGEX=<regex> [-DREJECT_REGEX=<regex>] -P expect_cli.cmake
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if (NOT rc STREQUAL EXPECT_RC)
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}\n${all}")
endif ()
if (NOT all MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match '${EXPECT_REGEX}':\n${all}")
endif ()
if (DEFINED REJECT_REGEX AND all MATCHES "${REJECT_REGEX}")
  message(FATAL_ERROR "output matches '${REJECT_REGEX}', which it must not:\n${all}")
endif ()
