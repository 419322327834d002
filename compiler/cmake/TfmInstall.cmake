#===- TfmInstall.cmake - install rules of tfm -----------------------------===#
#
# `cmake --install BUILD --prefix P` installs what a user of tfm needs and no
# more (docs/Runtime.md, "Linking a model into your program"):
#
#   P/bin              tfmc, tfm-opt, tfm-tokenize
#   P/lib              libtfm_runtime.a, libtfm_tokenizer.a (the tokenizers
#                      and tfm_main*), libtfm_runtime_mpi.a (with MPI),
#                      tfm_main.o (what tfmc links into executables),
#                      libtfm_sentencepiece.so (the tokenizers' dlopen bridge)
#   P/include/tfm      runtime.h, abi.h, tokenizer.h
#   P/lib/pkgconfig    tfm.pc (the runtime), tfm-tokenizer.pc (the
#                      tokenizers over it)
#   P/lib/cmake/tfm    tfmConfig.cmake, tfmConfigVersion.cmake (tfm::runtime,
#                      tfm::tokenizer, and tfm::runtime_mpi where built)
#
# tfmc finds the runtime in ../lib beside its own binary, so the installed
# tfmc links against the installed runtime. The tokenizers load
# libtfm_sentencepiece.so with dlopen: the link lines below that link them
# (tfm-tokenizer.pc, tfm::tokenizer, tfmc's own) carry P/lib as a run path,
# so the loader finds it there wherever the prefix is.
#
# The prefix is the one given at install time (--prefix), so tfm.pc is
# written then, and tfmConfig.cmake finds the prefix from its own place.
#===----------------------------------------------------------------------===#
include(CMakePackageConfigHelpers)

set(TFM_VERSION 0.1.0)
set(TFM_INSTALL_CMAKEDIR lib/cmake/tfm)

install(TARGETS tfmc tfm-opt tfm-tokenize RUNTIME DESTINATION bin)
# LLVM gives its tools the run path $ORIGIN/../lib alone once installed:
# tfmc and tfm-opt also need the folder of libMLIR.so and libLLVM.so.
set_property(TARGET tfmc tfm-opt APPEND PROPERTY INSTALL_RPATH
  ${LLVM_LIBRARY_DIR})
install(TARGETS tfm_runtime tfm_tokenizer ARCHIVE DESTINATION lib)
if(TARGET tfm_runtime_mpi)
  install(TARGETS tfm_runtime_mpi ARCHIVE DESTINATION lib)
endif()
install(TARGETS tfm_sentencepiece LIBRARY DESTINATION lib)
install(FILES ${CMAKE_BINARY_DIR}/lib/tfm_main.o DESTINATION lib)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/tfm
  DESTINATION include FILES_MATCHING PATTERN "*.h")

# What a program linking the runtime also links: jansson (static, as tfmc
# links executables), libomp (the generated code's threads; -fopenmp would
# pick GCC's libgomp, which lacks the __kmpc_* entry points), libm, libdl,
# pthreads.
set(TFM_OMP_LIB ${TFM_OMP_DIR}/libomp.so)

# pkg-config: written at install time, with the prefix of that install.
# tfm-tokenizer.pc requires tfm.pc, so its link line is the tokenizer
# library followed by the runtime's.
set(TFM_PC_LIBS "${TFM_JANSSON_STATIC} -L${TFM_OMP_DIR} -lomp \
-Wl,-rpath,${TFM_OMP_DIR} -lm -ldl -lpthread")
install(CODE "
  set(TFM_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(TFM_VERSION \"${TFM_VERSION}\")
  set(TFM_PC_LIBS \"${TFM_PC_LIBS}\")
  foreach(pc tfm tfm-tokenizer)
    configure_file(\"${PROJECT_SOURCE_DIR}/compiler/cmake/\${pc}.pc.in\"
      \"${CMAKE_BINARY_DIR}/install/\${pc}.pc\" @ONLY)
  endforeach()")
install(FILES ${CMAKE_BINARY_DIR}/install/tfm.pc
  ${CMAKE_BINARY_DIR}/install/tfm-tokenizer.pc DESTINATION lib/pkgconfig)

# The CMake package: tfm::runtime, tfm::tokenizer (and tfm::runtime_mpi),
# imported targets whose usage requirements are the pkg-config files'.
string(REPLACE ";" "|" TFM_MPI_LINK_ITEMS "${TFM_MPI_LINK}")
configure_file(${PROJECT_SOURCE_DIR}/compiler/cmake/tfmConfig.cmake.in
  ${CMAKE_BINARY_DIR}/install/tfmConfig.cmake @ONLY)
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/install/tfmConfigVersion.cmake
  VERSION ${TFM_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/install/tfmConfig.cmake
  ${CMAKE_BINARY_DIR}/install/tfmConfigVersion.cmake
  DESTINATION ${TFM_INSTALL_CMAKEDIR})
