# Installs the npm packages the tokenizer tests compare with (pinned in
# test/tokenizer/package-lock.json) into DST/node_modules with `npm ci`,
# unless DST already holds that exact lock file's install. Run by the ctest
# fixture tfm-npm-peers (before the lit suite) and by check-tfm:
#   cmake -DSRC=<test/tokenizer> -DDST=<build/test/npm-peers> -P NpmPeers.cmake
# A missing npm is an error that says how to install it.
cmake_minimum_required(VERSION 3.20)
find_program(NPM npm)
if(NOT NPM)
  message(FATAL_ERROR "npm is not installed: the tokenizer tests compare "
    "with the npm packages of test/tokenizer/package.json (apt-get install "
    "nodejs npm)")
endif()
file(MAKE_DIRECTORY "${DST}")
set(stamp "${DST}/node_modules/.tfm-lock")
if(EXISTS "${stamp}")
  file(SHA256 "${SRC}/package-lock.json" want)
  file(READ "${stamp}" have)
  if(want STREQUAL have)
    message(STATUS "npm peers: up to date in ${DST}")
    return()
  endif()
endif()
file(COPY "${SRC}/package.json" "${SRC}/package-lock.json" DESTINATION "${DST}")
execute_process(COMMAND "${NPM}" ci --no-audit --no-fund
  WORKING_DIRECTORY "${DST}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "npm ci in ${DST} failed (exit ${rc}); the tokenizer "
    "tests need the packages of test/tokenizer/package-lock.json")
endif()
file(SHA256 "${SRC}/package-lock.json" want)
file(WRITE "${stamp}" "${want}")
