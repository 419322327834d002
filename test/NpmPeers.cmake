# Installs the npm packages the tokenizer tests compare with (pinned in
# test/tokenizer/package-lock.json) into DST/node_modules with `npm ci`,
# unless DST already holds that exact lock file's install; then fetches
# llama.cpp's tokenizer test files (below) into DST/llama-vocab/models.
# Run by the ctest fixture tfm-npm-peers (before the lit suite) and by
# check-tfm:
#   cmake -DSRC=<test/tokenizer> -DDST=<build/test/npm-peers> -P NpmPeers.cmake
# A missing npm or git is an error that says how to install it.
cmake_minimum_required(VERSION 3.20)
find_program(NPM npm)
if(NOT NPM)
  message(FATAL_ERROR "npm is not installed: the tokenizer tests compare "
    "with the npm packages of test/tokenizer/package.json (apt-get install "
    "nodejs npm)")
endif()
get_filename_component(DST "${DST}" ABSOLUTE)
get_filename_component(SRC "${SRC}" ABSOLUTE)
file(MAKE_DIRECTORY "${DST}")
set(stamp "${DST}/node_modules/.tfm-lock")
set(npm_done FALSE)
if(EXISTS "${stamp}")
  file(SHA256 "${SRC}/package-lock.json" want)
  file(READ "${stamp}" have)
  if(want STREQUAL have)
    message(STATUS "npm peers: up to date in ${DST}")
    set(npm_done TRUE)
  endif()
endif()
if(NOT npm_done)
  file(COPY "${SRC}/package.json" "${SRC}/package-lock.json"
    DESTINATION "${DST}")
  execute_process(COMMAND "${NPM}" ci --no-audit --no-fund
    WORKING_DIRECTORY "${DST}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "npm ci in ${DST} failed (exit ${rc}); the "
      "tokenizer tests need the packages of test/tokenizer/package-lock.json")
  endif()
  file(SHA256 "${SRC}/package-lock.json" want)
  file(WRITE "${stamp}" "${want}")
endif()

# llama.cpp's tokenizer tests (tests/test-tokenizer-0.cpp) read vocabulary-
# only GGUF files of published tokenizers with their inputs and expected ids
# (models/ggml-vocab-NAME.gguf, .gguf.inp, .gguf.out). They come from the
# llama.cpp tree that the npm package node-llama-cpp ships as a git bundle
# (llama/gitRelease.bundle, one commit): `npm pack` fetches the package
# tarball (35.7 MB, checked against the SHA-512 below), git checks the
# bundle's commit and writes out just those files (68 MB); a few seconds
# besides the download. The same release as ../shared/peers/llama.
set(llama_package node-llama-cpp)
set(llama_version 3.22.1)
set(llama_sha512 6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f)
set(llama_commit de3ff815ea7d559ee917f063901b8986f038abc6)
set(llama_vocabs llama-spm llama-bpe qwen2 qwen35 gpt-2 phi-3 falcon mpt
  starcoder refact command-r deepseek-llm deepseek-coder bert-bge gemma-4)
# Vocabularies without test files in the tree (test/tokenizer/Inputs has the
# ids llama.cpp gives for them).
set(llama_vocabs_bare nomic-bert-moe)
set(vdir "${DST}/llama-vocab")
set(vstamp "${vdir}/.tfm-stamp")
set(vwant "${llama_package}@${llama_version} ${llama_sha512} ${llama_commit} ${llama_vocabs} ${llama_vocabs_bare}")
if(EXISTS "${vstamp}")
  file(READ "${vstamp}" vhave)
  if(vhave STREQUAL vwant)
    message(STATUS "llama.cpp vocabularies: up to date in ${vdir}")
    return()
  endif()
endif()
find_program(GIT git)
if(NOT GIT)
  message(FATAL_ERROR "git is not installed: the tokenizer tests take "
    "llama.cpp's vocabulary files out of node-llama-cpp's git bundle "
    "(apt-get install git)")
endif()
file(REMOVE_RECURSE "${vdir}")
file(MAKE_DIRECTORY "${vdir}/pack")
message(STATUS "llama.cpp vocabularies: npm pack ${llama_package}@${llama_version}")
execute_process(COMMAND "${NPM}" pack --silent "${llama_package}@${llama_version}"
  WORKING_DIRECTORY "${vdir}/pack" RESULT_VARIABLE rc OUTPUT_QUIET)
set(tgz "${vdir}/pack/${llama_package}-${llama_version}.tgz")
if(NOT rc EQUAL 0 OR NOT EXISTS "${tgz}")
  message(FATAL_ERROR "npm pack ${llama_package}@${llama_version} failed "
    "(exit ${rc}): the tokenizer tests need llama.cpp's vocabulary files "
    "from that package")
endif()
file(SHA512 "${tgz}" got)
if(NOT got STREQUAL llama_sha512)
  message(FATAL_ERROR "${tgz}: SHA-512 ${got}, expected ${llama_sha512}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xzf "${tgz}"
  package/llama/gitRelease.bundle
  WORKING_DIRECTORY "${vdir}/pack" RESULT_VARIABLE rc)
set(bundle "${vdir}/pack/package/llama/gitRelease.bundle")
if(NOT rc EQUAL 0 OR NOT EXISTS "${bundle}")
  message(FATAL_ERROR "${tgz} holds no package/llama/gitRelease.bundle")
endif()
set(repo "${vdir}/pack/llama.cpp.git")
set(paths)
foreach(v IN LISTS llama_vocabs)
  list(APPEND paths models/ggml-vocab-${v}.gguf models/ggml-vocab-${v}.gguf.inp
    models/ggml-vocab-${v}.gguf.out)
endforeach()
foreach(v IN LISTS llama_vocabs_bare)
  list(APPEND paths models/ggml-vocab-${v}.gguf)
endforeach()
execute_process(COMMAND "${GIT}" init -q --bare "${repo}" RESULT_VARIABLE rc1)
execute_process(COMMAND "${GIT}" -C "${repo}" fetch -q "${bundle}"
  HEAD:refs/heads/release RESULT_VARIABLE rc2)
execute_process(COMMAND "${GIT}" -C "${repo}" rev-parse release
  OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc3)
if(NOT rc1 EQUAL 0 OR NOT rc2 EQUAL 0 OR NOT rc3 EQUAL 0)
  message(FATAL_ERROR "git could not read ${bundle}")
endif()
if(NOT head STREQUAL llama_commit)
  message(FATAL_ERROR "${bundle}: commit ${head}, expected ${llama_commit}")
endif()
execute_process(COMMAND "${GIT}" -C "${repo}" archive --format=tar
  -o "${vdir}/pack/vocab.tar" release -- ${paths} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "git archive of llama.cpp's models/ggml-vocab-* failed")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xf "${vdir}/pack/vocab.tar"
  WORKING_DIRECTORY "${vdir}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not unpack ${vdir}/pack/vocab.tar")
endif()
file(REMOVE_RECURSE "${vdir}/pack")
file(WRITE "${vstamp}" "${vwant}")
message(STATUS "llama.cpp vocabularies: ${vdir}/models")
