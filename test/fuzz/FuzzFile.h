//===- FuzzFile.h - fuzz inputs as files for the runtime's loaders
//---------===//
//
// The runtime's loaders take paths: each input is written to one file per
// process under /dev/shm (or TMPDIR) and read back through the path.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TEST_FUZZ_FUZZFILE_H
#define TFM_TEST_FUZZ_FUZZFILE_H

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

inline const std::string &fuzzFilePath(const char *suffix) {
  static const std::string path = [&] {
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                      : std::getenv("TMPDIR")       ? std::getenv("TMPDIR")
                                                    : "/tmp";
    return std::string(dir) + "/tfm-fuzz-" + std::to_string(getpid()) + suffix;
  }();
  return path;
}

inline bool writeFuzzFile(const std::string &path, const uint8_t *data,
                          size_t size) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

#endif // TFM_TEST_FUZZ_FUZZFILE_H
