//===- Diagnostics.cpp - front-end diagnostics ----------------------------===//

#include "tfm/Frontend/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::tfm;

Location DiagEmitter::loc(llvm::SMLoc smloc) const {
  unsigned bufId = sourceMgr.getMainFileID();
  const llvm::MemoryBuffer *buf = sourceMgr.getMemoryBuffer(bufId);
  if (!smloc.isValid() || smloc.getPointer() < buf->getBufferStart() ||
      smloc.getPointer() > buf->getBufferEnd())
    return UnknownLoc::get(context);
  auto [line, col] = sourceMgr.getLineAndColumn(smloc, bufId);
  return FileLineColLoc::get(context, buf->getBufferIdentifier(), line, col);
}

std::string mlir::tfm::clipLongWords(llvm::StringRef text) {
  std::string out;
  out.reserve(std::min<size_t>(text.size(), 4096));
  size_t i = 0;
  while (i < text.size()) {
    // A word: a run of characters that are not spaces or quotes.
    size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\'' &&
           text[end] != '\n')
      ++end;
    if (end == i) {
      out += text[i++];
      continue;
    }
    llvm::StringRef word = text.slice(i, end);
    if (word.size() > kMaxWordInMessage) {
      size_t keep = kMaxWordInMessage - 3;
      // Do not cut a UTF-8 character: back up over continuation bytes.
      while (keep > 0 &&
             (static_cast<unsigned char>(word[keep]) & 0xC0) == 0x80)
        --keep;
      out += word.take_front(keep);
      out += "...";
    } else {
      out += word;
    }
    i = end;
  }
  return out;
}

DiagRef DiagEmitter::error(llvm::SMLoc smloc, const llvm::Twine &msg) {
  // Past the limit errors are only counted: a caller that compares counts
  // must still see that something went wrong.
  if (numErrors >= kMaxErrors) {
    ++numErrors;
    return DiagRef();
  }
  std::string text = clipLongWords(msg.str());
  std::string key =
      std::to_string(reinterpret_cast<uintptr_t>(smloc.getPointer())) + ":" +
      text;
  if (!seen.insert(key).second)
    return DiagRef();
  if (++numErrors == kMaxErrors) {
    auto diag = emitError(loc(smloc), text);
    diag.attachNote() << "too many errors (" << kMaxErrors
                      << "); stopping here";
    return DiagRef(std::move(diag));
  }
  return DiagRef(emitError(loc(smloc), text));
}

DiagRef DiagEmitter::warning(llvm::SMLoc smloc, const llvm::Twine &msg) {
  std::string text = clipLongWords(msg.str());
  std::string key =
      "w" + std::to_string(reinterpret_cast<uintptr_t>(smloc.getPointer())) +
      ":" + text;
  if (!seen.insert(key).second)
    return DiagRef();
  return DiagRef(emitWarning(loc(smloc), text));
}

llvm::StringRef mlir::tfm::closestMatch(llvm::StringRef name,
                                        llvm::ArrayRef<llvm::StringRef> cands) {
  llvm::StringRef best;
  unsigned bestDist = ~0u;
  for (llvm::StringRef c : cands) {
    unsigned d = name.edit_distance(c, /*AllowReplacements=*/true,
                                    /*MaxEditDistance=*/bestDist);
    if (d < bestDist) {
      bestDist = d;
      best = c;
    }
  }
  // A plausible typo: at most a third of the word, and at least one letter.
  unsigned limit = std::max<unsigned>(1, (name.size() + 2) / 3);
  if (best.empty() || bestDist > limit)
    return {};
  return best;
}
