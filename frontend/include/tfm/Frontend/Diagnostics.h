//===- Diagnostics.h - front-end diagnostics --------------------*- C++ -*-===//
//
// Front-end errors go through MLIR's diagnostic engine with FileLineColLoc
// locations into the SourceMgr buffer, so tfmc prints them clang-style and
// lit checks them with --verify-diagnostics. Identical diagnostics (the same
// statement checked once per stack) are reported once, and a file stops
// after a bounded number of errors.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_DIAGNOSTICS_H
#define TFM_FRONTEND_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::tfm {

/// An emitted error that may still get notes; empty when the diagnostic was
/// suppressed (a duplicate, or past the error limit). The diagnostic is
/// reported when this goes out of scope.
class DiagRef {
public:
  DiagRef() = default;
  explicit DiagRef(InFlightDiagnostic &&diag) : diag(std::move(diag)) {}
  explicit operator bool() const { return diag.has_value(); }
  Diagnostic &attachNote(Location loc) { return diag->attachNote(loc); }

private:
  std::optional<InFlightDiagnostic> diag;
};

class DiagEmitter {
public:
  DiagEmitter(llvm::SourceMgr &sourceMgr, MLIRContext *context)
      : sourceMgr(sourceMgr), context(context) {}

  /// The MLIR location of a pointer into the main buffer.
  Location loc(llvm::SMLoc smloc) const;

  /// Emits an error (deduplicated); the returned diagnostic may get notes.
  DiagRef error(llvm::SMLoc smloc, const llvm::Twine &msg);
  DiagRef warning(llvm::SMLoc smloc, const llvm::Twine &msg);

  /// Every error reported, also those past the limit that were not shown.
  unsigned errorCount() const { return numErrors; }
  bool tooManyErrors() const { return numErrors >= kMaxErrors; }
  MLIRContext *getContext() const { return context; }
  llvm::SourceMgr &getSourceMgr() const { return sourceMgr; }

  static constexpr unsigned kMaxErrors = 25;

private:
  llvm::SourceMgr &sourceMgr;
  MLIRContext *context;
  unsigned numErrors = 0;
  llvm::StringSet<> seen;
};

/// The longest word (a run without spaces or quotes: an identifier, a
/// number) a message shows whole.
constexpr size_t kMaxWordInMessage = 64;

/// `text` with every word longer than kMaxWordInMessage cut to its start
/// and "...", so that a 10 MB identifier gives a short message.
std::string clipLongWords(llvm::StringRef text);

/// Returns the candidate closest to `name` by edit distance, or "" when none
/// is close enough to be a plausible typo.
llvm::StringRef closestMatch(llvm::StringRef name,
                             llvm::ArrayRef<llvm::StringRef> candidates);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_DIAGNOSTICS_H
