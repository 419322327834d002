//===- sentencepiece_bridge.cpp - libsentencepiece behind a C ABI ---------===//
//
// libtfm_sentencepiece.so: the runtime's tokenizer loads it at first use of a
// SentencePiece `.model` file (tokenizer_spm.c). Encoding and decoding are
// libsentencepiece's; the pieces' types and the model's algorithm, which its
// public API does not expose without the protobuf headers, are read from
// the serialized ModelProto it returns.
//
// libsentencepiece reports most errors as a Status, but some parts of it
// throw (darts-clone, building a model's trie, throws on a piece that
// starts with a NUL byte, which load() refuses first; allocations throw
// std::bad_alloc): every entry point catches, as an exception must not
// cross the C ABI into the runtime (it would end the process).
//
//===----------------------------------------------------------------------===//
#include "sentencepiece_bridge.h"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

struct tfm_spm_model {
  sentencepiece::SentencePieceProcessor processor;
  std::vector<int> types; // per id
  int modelType = TFM_SPM_UNIGRAM;
};

namespace {

void setError(char *err, size_t errLen, std::string message) {
  while (!message.empty() && message.back() == ' ')
    message.pop_back();
  if (errLen)
    std::snprintf(err, errLen, "%s", message.c_str());
}

/// The message of the exception being handled (in a catch block).
std::string currentException() {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    return "out of memory";
  } catch (const std::exception &e) {
    return std::string("libsentencepiece failed: ") + e.what();
  } catch (...) {
    return "libsentencepiece failed (an exception of unknown type)";
  }
}

/// Reads a protobuf varint at p; false at the end of the data or on a
/// varint longer than 10 bytes.
bool readVarint(const unsigned char *&p, const unsigned char *end,
                uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    unsigned char byte = *p++;
    value |= uint64_t(byte & 0x7F) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

/// Calls `onField(field, wireType, value, data, size)` for each field of a
/// protobuf message (value for varints, data/size for length-delimited
/// ones); false if the message is malformed.
template <typename Fn>
bool forEachField(const unsigned char *p, const unsigned char *end,
                  Fn onField) {
  while (p < end) {
    uint64_t key, value = 0;
    if (!readVarint(p, end, key))
      return false;
    const unsigned char *data = nullptr;
    uint64_t size = 0;
    switch (key & 7) {
    case 0:
      if (!readVarint(p, end, value))
        return false;
      break;
    case 1:
      if (end - p < 8)
        return false;
      p += 8;
      break;
    case 2:
      if (!readVarint(p, end, size) || size > uint64_t(end - p))
        return false;
      data = p;
      p += size;
      break;
    case 5:
      if (end - p < 4)
        return false;
      p += 4;
      break;
    default:
      return false;
    }
    onField(key >> 3, key & 7, value, data, size);
  }
  return true;
}

/// ModelProto: 1 pieces (SentencePiece: 3 type), 2 trainer_spec
/// (TrainerSpec: 3 model_type).
bool readProtoFacts(const std::string &proto, tfm_spm_model &m) {
  auto *begin = reinterpret_cast<const unsigned char *>(proto.data());
  bool ok = true;
  ok = forEachField(begin, begin + proto.size(),
                    [&](uint64_t field, uint64_t wire, uint64_t,
                        const unsigned char *data, uint64_t size) {
                      if (wire != 2)
                        return;
                      if (field == 1) {
                        int type = TFM_SPM_NORMAL;
                        ok &=
                            forEachField(data, data + size,
                                         [&](uint64_t f, uint64_t w, uint64_t v,
                                             const unsigned char *, uint64_t) {
                                           if (f == 3 && w == 0)
                                             type = int(v);
                                         });
                        m.types.push_back(type);
                      } else if (field == 2) {
                        ok &=
                            forEachField(data, data + size,
                                         [&](uint64_t f, uint64_t w, uint64_t v,
                                             const unsigned char *, uint64_t) {
                                           if (f == 3 && w == 0)
                                             m.modelType = int(v);
                                         });
                      }
                    }) &&
       ok;
  return ok;
}

/// The index of the first piece (ModelProto: 1 pieces; SentencePiece:
/// 1 piece) holding a NUL byte, or -1.
long firstNulPiece(const std::string &proto) {
  auto *begin = reinterpret_cast<const unsigned char *>(proto.data());
  long index = 0, found = -1;
  forEachField(begin, begin + proto.size(),
               [&](uint64_t field, uint64_t wire, uint64_t,
                   const unsigned char *data, uint64_t size) {
                 if (field != 1 || wire != 2)
                   return;
                 forEachField(data, data + size,
                              [&](uint64_t f, uint64_t w, uint64_t,
                                  const unsigned char *d, uint64_t n) {
                                if (f == 1 && w == 2 && found < 0 &&
                                    std::memchr(d, 0, n))
                                  found = index;
                              });
                 ++index;
               });
  return found;
}

/// The bytes of the file at `path`; false (errno set) if it cannot be read.
bool readFile(const char *path, std::string &out) {
  std::FILE *f = std::fopen(path, "rb");
  if (!f)
    return false;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  int error = std::ferror(f) ? errno : 0;
  std::fclose(f);
  errno = error;
  return !error;
}

tfm_spm_model *loadModel(const char *path, char *err, size_t errLen) {
  using sentencepiece::util::Status;
  using sentencepiece::util::StatusCode;
  auto m = std::make_unique<tfm_spm_model>();
  std::string proto;
  if (!readFile(path, proto)) {
    setError(err, errLen,
             std::string("cannot read it: ") + std::strerror(errno));
    return nullptr;
  }
  // libsentencepiece's tries (darts-clone) take the pieces as C strings: a
  // piece holding a NUL byte would be cut short there, and one starting
  // with it makes the trie builder throw. Refused before loading.
  long nulPiece = firstNulPiece(proto);
  Status status =
      nulPiece >= 0
          ? Status(StatusCode::kInternal,
                   "piece " + std::to_string(nulPiece) + " holds a NUL byte")
          : m->processor.LoadFromSerializedProto(proto);
  if (status.ok() &&
      (!readProtoFacts(m->processor.serialized_model_proto(), *m) ||
       m->types.size() != size_t(m->processor.GetPieceSize())))
    status = Status(StatusCode::kInternal, "the model's pieces cannot be read");
  if (!status.ok()) {
    setError(err, errLen, status.ToString());
    return nullptr;
  }
  return m.release();
}

tfm_spm_model *load(const char *path, char *err, size_t errLen) {
  try {
    return loadModel(path, err, errLen);
  } catch (...) {
    setError(err, errLen, currentException());
    return nullptr;
  }
}

void release(tfm_spm_model *m) { delete m; }

int32_t size(const tfm_spm_model *m) { return m->processor.GetPieceSize(); }

const char *piece(const tfm_spm_model *m, int32_t id, size_t *len) {
  const std::string &p = m->processor.IdToPiece(id);
  *len = p.size();
  return p.data();
}

int pieceType(const tfm_spm_model *m, int32_t id) {
  return id >= 0 && size_t(id) < m->types.size() ? m->types[id] : 0;
}

int modelType(const tfm_spm_model *m) { return m->modelType; }
int32_t unkId(const tfm_spm_model *m) { return m->processor.unk_id(); }
int32_t bosId(const tfm_spm_model *m) { return m->processor.bos_id(); }
int32_t eosId(const tfm_spm_model *m) { return m->processor.eos_id(); }

int encode(const tfm_spm_model *m, const char *text, size_t n, int32_t **ids,
           size_t *count, char *err, size_t errLen) {
  std::vector<int> out;
  sentencepiece::util::Status status;
  try {
    status = m->processor.Encode(std::string_view(text, n), &out);
  } catch (...) {
    setError(err, errLen, currentException());
    return -1;
  }
  if (!status.ok()) {
    setError(err, errLen, status.ToString());
    return -1;
  }
  *ids =
      static_cast<int32_t *>(std::malloc((out.size() + 1) * sizeof(int32_t)));
  if (!*ids) {
    setError(err, errLen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < out.size(); ++i)
    (*ids)[i] = out[i];
  *count = out.size();
  return 0;
}

int decode(const tfm_spm_model *m, const int32_t *ids, size_t n, char **text,
           size_t *len, char *err, size_t errLen) {
  std::string out;
  sentencepiece::util::Status status;
  try {
    std::vector<int> in(ids, ids + n);
    status = m->processor.Decode(in, &out);
  } catch (...) {
    setError(err, errLen, currentException());
    return -1;
  }
  if (!status.ok()) {
    setError(err, errLen, status.ToString());
    return -1;
  }
  *text = static_cast<char *>(std::malloc(out.size() + 1));
  if (!*text) {
    setError(err, errLen, "out of memory");
    return -1;
  }
  std::memcpy(*text, out.data(), out.size());
  (*text)[out.size()] = 0;
  *len = out.size();
  return 0;
}

const tfm_spm_api api = {load,  release, size,  piece,  pieceType, modelType,
                         unkId, bosId,   eosId, encode, decode};

} // namespace

extern "C" __attribute__((visibility("default"))) const tfm_spm_api *
tfm_sentencepiece_bridge_v1(void) {
  return &api;
}
