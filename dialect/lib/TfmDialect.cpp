//===- TfmDialect.cpp - tfm dialect ---------------------------------------===//

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/TfmOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tfm;

#include "tfm/Dialect/TfmEnums.cpp.inc"
#include "tfm/Dialect/TfmOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tfm/Dialect/TfmAttrs.cpp.inc"

void TfmDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tfm/Dialect/TfmAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "tfm/Dialect/TfmOps.cpp.inc"
      >();
}
