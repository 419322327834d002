//===- TfmDialect.cpp - tfm dialect ---------------------------------------===//

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/ModelDescription.h"
#include "tfm/Dialect/TfmOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
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
  addOperations<
#define GET_OP_LIST
#include "tfm/Dialect/TfmKernelOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//

/// Checks one entry {name = "...", panel = W : i64} of tfm.params, with
/// `bf16_pairs` (a unit) where a panel is packed in bf16 pairs of K, or
/// `int8_quads` where it is quantized to int8 in quads of K, or, panel 0,
/// `ggml = "rows"` / `"type"` for the two parameters of a weight in ggml's
/// blocks (tfm/ggml_blocks.h).
static LogicalResult verifyParamEntry(Operation *op, Attribute entry,
                                      size_t index) {
  auto dict = dyn_cast<DictionaryAttr>(entry);
  auto name = dict ? dict.getAs<StringAttr>("name") : StringAttr();
  auto panel = dict ? dict.getAs<IntegerAttr>("panel") : IntegerAttr();
  Attribute pairs = dict ? dict.get("bf16_pairs") : Attribute();
  Attribute quads = dict ? dict.get("int8_quads") : Attribute();
  Attribute ggml = dict ? dict.get("ggml") : Attribute();
  auto badLayout = [&](Attribute layout) {
    return layout && (!isa<UnitAttr>(layout) || panel.getInt() == 0);
  };
  // Called only once `panel` is known to be an i64 (below).
  auto badGgml = [&]() {
    auto part = dyn_cast_or_null<StringAttr>(ggml);
    return ggml && (!part || panel.getInt() != 0 ||
                    (part.getValue() != "rows" && part.getValue() != "type"));
  };
  if (!dict ||
      dict.size() != 2 + (pairs ? 1 : 0) + (quads ? 1 : 0) + (ggml ? 1 : 0) ||
      !name || name.getValue().empty() || !panel ||
      !panel.getType().isSignlessInteger(64) || panel.getInt() < 0 ||
      (pairs && quads) || badLayout(pairs) || badLayout(quads) || badGgml())
    return op->emitOpError()
           << "'" << TfmDialect::ParamsAttrHelper::getNameStr() << "' entry "
           << index
           << " must be {name = \"<non-empty>\", panel = <non-negative i64>}, "
              "with bf16_pairs or int8_quads where a panel is in bf16 pairs "
              "or int8 quads, or panel 0 and ggml = \"rows\" or \"type\" "
              "for a weight in ggml blocks, got "
           << entry;
  return success();
}

LogicalResult TfmDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  if (name == ParamsAttrHelper::getNameStr()) {
    auto table = dyn_cast<ArrayAttr>(value);
    if (!table)
      return op->emitOpError()
             << "'" << name << "' must be an array of parameters, got "
             << value;
    for (auto [i, entry] : llvm::enumerate(table))
      if (failed(verifyParamEntry(op, entry, i)))
        return failure();
    return success();
  }
  if (name == NumInputsAttrHelper::getNameStr()) {
    auto n = dyn_cast<IntegerAttr>(value);
    if (!n || !n.getType().isSignlessInteger(64) || n.getInt() < 0)
      return op->emitOpError()
             << "'" << name << "' must be a non-negative i64, got " << value;
    return success();
  }
  if (name == ModelAttrHelper::getNameStr()) {
    bool known;
    {
      std::lock_guard<std::mutex> lock(verifiedModelsMutex);
      known = verifiedModels.contains(value);
    }
    if (failed(verifyModelAttribute(op, value, /*checkDescription=*/!known)))
      return failure();
    std::lock_guard<std::mutex> lock(verifiedModelsMutex);
    verifiedModels.insert(value);
    return success();
  }
  if (name == KeepParallelAttrHelper::getNameStr()) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name << "' must be a unit attribute, got " << value;
    return success();
  }
  if (name == SharedKernelAttrHelper::getNameStr()) {
    if (!isa<UnitAttr>(value))
      return op->emitOpError()
             << "'" << name << "' must be a unit attribute, got " << value;
    auto fn = dyn_cast<FunctionOpInterface>(op);
    if (!fn || fn.isExternal())
      return op->emitOpError()
             << "'" << name << "' must be on a function with a body";
    return success();
  }
  if (name == KvGroupAttrHelper::getNameStr()) {
    auto group = dyn_cast<IntegerAttr>(value);
    if (!group || !group.getType().isSignlessInteger(64) || group.getInt() <= 0)
      return op->emitOpError()
             << "'" << name << "' must be a positive i64, got " << value;
    auto attention = dyn_cast<AttentionKernelOp>(op);
    if (!attention || !attention.getPositions())
      return op->emitOpError() << "'" << name
                               << "' must be on a tfm.attention_kernel over "
                                  "a KV cache (positions)";
    return success();
  }
  return op->emitOpError() << "has an unknown tfm attribute '" << name << "'";
}

std::optional<size_t> mlir::tfm::findExcessiveNesting(llvm::StringRef text) {
  size_t depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') { // a string literal, with escapes
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > kMaxIRNesting)
        return i;
    } else if ((c == ')' || c == ']' || c == '}' ||
                (c == '>' && (i == 0 || text[i - 1] != '-'))) &&
               depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}
