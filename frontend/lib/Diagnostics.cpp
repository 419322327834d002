//===- Diagnostics.cpp - front-end diagnostics ----------------------------===//

#include "tfm/Frontend/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/Twine.h"

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

DiagRef DiagEmitter::error(llvm::SMLoc smloc, const llvm::Twine &msg) {
  std::string text = msg.str();
  std::string key =
      std::to_string(reinterpret_cast<uintptr_t>(smloc.getPointer())) + ":" +
      text;
  if (numErrors >= kMaxErrors || !seen.insert(key).second)
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
  std::string text = msg.str();
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
