//===- OutlineLayers.cpp - one function per distinct layer ----------------===//
//
// MLIRGen gives every op of a layer the location
// `loc("<prefix>layers.<i>"(..))`. This pass moves the ops of each layer of a
// model function into a private function and calls it; layers whose functions
// are structurally equal (the same ops on the same shapes, differing only in
// which weights they are given) share one, within a function and across the
// functions of the module: a decoder's forward function attends through
// fresh caches (MLIRGen), so its layers are the step function's. Code size,
// and with it the LLVM part of compile time, no longer grows with `layers`
// nor with the number of entry points.
//
// Before:                                After:
//   %a = linalg... {layers.0}              %x1 = call @m_layer0(%x0, %w0...)
//   %x1 = linalg... {layers.0}             %x2 = call @m_layer0(%x1, %w1...)
//   %b = linalg... {layers.1}              func private @m_layer0(...)
//   %x2 = linalg... {layers.1}
//
// Constants and tensor.empty are cloned into the function (their operands
// become arguments); a pure op whose operands come from outside every layer
// (a shape computation CSE merged into the first layer, say) stays in the
// caller, so that the first layer looks like the others. A layer whose
// results are used before its last op (interleaved with other code) is left
// inline.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "tfm-outline-layers"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMOUTLINELAYERS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;

namespace {

/// The layer name in `loc` ("layers.3", "decoder.layers.3"), or "" if none
/// or several.
StringRef layerOf(Location loc) {
  StringRef found;
  bool conflict = false;
  loc->walk([&](Location l) {
    if (auto name = dyn_cast<NameLoc>(l)) {
      StringRef n = name.getName().getValue();
      size_t at = n.rfind("layers.");
      if (at != StringRef::npos && (at == 0 || n[at - 1] == '.')) {
        if (!found.empty() && found != n)
          conflict = true;
        found = n;
      }
    }
    return WalkResult::advance();
  });
  return conflict ? StringRef() : found;
}

/// Ops cloned into each function rather than passed in.
bool isRematerialized(Operation *op) {
  if (op->hasTrait<OpTrait::ConstantLike>() || isa<tensor::EmptyOp>(op))
    return true;
  // An accumulator filled with a constant: a destination, not data.
  auto fill = dyn_cast<linalg::FillOp>(op);
  return fill && fill.hasPureTensorSemantics() &&
         fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
         matchPattern(fill.getInputs()[0], m_Constant());
}

struct Layer {
  std::string name;
  SmallVector<Operation *> ops; ///< in block order
};

/// The values a set of ops uses from outside the set, in first-use order,
/// and the ops outside the set (constants, tensor.empty) to clone with it.
void collectInputs(ArrayRef<Operation *> ops,
                   const llvm::SmallPtrSetImpl<Operation *> &inSet,
                   llvm::SetVector<Value> &inputs,
                   llvm::SetVector<Operation *> &clones) {
  std::function<void(Value)> use = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && inSet.contains(def))
      return;
    if (def && isRematerialized(def)) {
      if (clones.contains(def))
        return;
      for (Value operand : def->getOperands())
        use(operand);
      clones.insert(def);
      return;
    }
    inputs.insert(v);
  };
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      use(v);
    // Values captured by regions (linalg bodies may read outer scalars).
    llvm::SetVector<Value> above;
    for (Region &r : op->getRegions())
      getUsedValuesDefinedAbove(r, above);
    for (Value v : above)
      use(v);
  }
}

class Outliner {
public:
  /// `prototypes`: the layer functions outlined so far, from every function
  /// of the module (a decoder's forward and step functions share theirs).
  Outliner(ModuleOp module, func::FuncOp func, SymbolTable &symbols,
           SmallVectorImpl<func::FuncOp> &prototypes)
      : module(module), func(func), symbols(symbols), prototypes(prototypes) {}
  void run();

private:
  /// Outlines `layer` into a new function, or returns an existing one that
  /// is structurally equal; replaces the layer's ops by a call.
  void outline(Layer &layer);
  /// Whether `fn`'s body is `proto`'s up to the values returned; if so,
  /// `resultIndex[i]` is the result of `proto` that is `fn`'s result i
  /// (results `proto` lacked are added to it, and its calls rebuilt).
  bool matchBody(func::FuncOp proto, func::FuncOp fn,
                 SmallVectorImpl<unsigned> &resultIndex);

  ModuleOp module;
  func::FuncOp func;
  SymbolTable &symbols;
  SmallVectorImpl<func::FuncOp> &prototypes;
};

/// Ops that are worth recomputing in each layer rather than passing from one
/// layer to the next: shapes, views, empty and filled destinations.
bool isCheap(Operation *op) {
  if (!isPure(op))
    return false;
  if (isa<tensor::EmptyOp, linalg::FillOp, tensor::CollapseShapeOp,
          tensor::ExpandShapeOp, tensor::ExtractSliceOp, tensor::CastOp>(op))
    return true;
  // Scalar and index arithmetic (shapes).
  return op->getNumRegions() == 0 &&
         llvm::none_of(op->getResultTypes(), llvm::IsaPred<ShapedType>);
}

void Outliner::run() {
  Block &body = func.getBody().front();
  // The layer of each op. Constants are cloned where used; the ABI's
  // to_tensor views of the entry block's buffers are how weights come in.
  llvm::DenseMap<Operation *, StringRef> tags;
  for (Operation &op : body.without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>() ||
        isa<bufferization::ToTensorOp>(op))
      continue;
    StringRef name = layerOf(op.getLoc());
    if (name.empty())
      continue;
    tags[&op] = name;
  }

  // CSE merged the cheap ops that every layer computes the same way (the
  // view of the encoder's output that cross-attention reads, a zero-filled
  // accumulator) into the first layer that has them. Give each layer its
  // own copy again, so that the first layer looks like the others.
  //
  // A cheap op over what its own layer computed (the expand_shape of a
  // linear's matrix that is the layer's output) stays where it is: a copy
  // in the next layer would make that layer read the matrix, and the first
  // layer, which reads the embedding, would look unlike the others.
  std::function<bool(Operation *)> viewsLayerResult = [&](Operation *def) {
    StringRef layer = tags.lookup(def);
    return llvm::any_of(def->getOperands(), [&](Value operand) {
      Operation *src = operand.getDefiningOp();
      if (!src || tags.lookup(src) != layer)
        return false;
      return !isCheap(src) || viewsLayerResult(src);
    });
  };
  llvm::DenseMap<std::pair<Operation *, const char *>, Operation *> copies;
  std::function<Value(Value, StringRef, Operation *)> localize =
      [&](Value v, StringRef layer, Operation *user) -> Value {
    Operation *def = v.getDefiningOp();
    if (!def)
      return v;
    auto it = tags.find(def);
    if (it == tags.end() || it->second == layer || !isCheap(def) ||
        viewsLayerResult(def))
      return v;
    // No reference into `copies` is held across the recursive call below,
    // which inserts into it (a rehash would leave the reference dangling).
    Operation *copy = copies.lookup({def, layer.data()});
    if (!copy) {
      OpBuilder b(user);
      copy = b.clone(*def);
      copy->setLoc(user->getLoc());
      copies[{def, layer.data()}] = copy;
      if (!layer.empty())
        tags[copy] = layer;
      for (OpOperand &operand : copy->getOpOperands())
        operand.set(localize(operand.get(), layer, copy));
    }
    return copy->getResult(cast<OpResult>(v).getResultNumber());
  };
  // Code outside every layer (the final norm) gets its own copies too.
  for (Operation &op : llvm::make_early_inc_range(body)) {
    StringRef layer = tags.lookup(&op);
    for (OpOperand &operand : op.getOpOperands())
      operand.set(localize(operand.get(), layer, &op));
  }

  llvm::MapVector<StringRef, Layer> layers;
  for (Operation &op : body.without_terminator()) {
    auto it = tags.find(&op);
    if (it == tags.end())
      continue;
    Layer &layer = layers[it->second];
    layer.name = it->second.str();
    layer.ops.push_back(&op);
  }
  for (auto &entry : layers)
    outline(entry.second);
}

bool Outliner::matchBody(func::FuncOp proto, func::FuncOp fn,
                         SmallVectorImpl<unsigned> &resultIndex) {
  if (proto.getArgumentTypes() != fn.getArgumentTypes())
    return false;
  Block &pb = proto.getBody().front(), &fb = fn.getBody().front();
  if (pb.getOperations().size() != fb.getOperations().size())
    return false;
  // fn's values to proto's.
  llvm::DenseMap<Value, Value> map;
  for (auto [f, p] : llvm::zip(fb.getArguments(), pb.getArguments()))
    map[f] = p;
  auto check = [&](Value f, Value p) {
    return success(f == p || map.lookup(f) == p);
  };
  auto mark = [&](Value f, Value p) { map[f] = p; };
  for (auto [f, p] :
       llvm::zip(fb.without_terminator(), pb.without_terminator()))
    if (!OperationEquivalence::isEquivalentTo(
            &f, &p, check, mark, OperationEquivalence::IgnoreLocations))
      return false;

  auto protoReturn = cast<func::ReturnOp>(pb.getTerminator());
  SmallVector<Value> returned(protoReturn.getOperands());
  resultIndex.clear();
  for (Value f : fb.getTerminator()->getOperands()) {
    Value p = map.lookup(f);
    if (!p)
      return false;
    auto it = llvm::find(returned, p);
    resultIndex.push_back(it - returned.begin());
    if (it == returned.end())
      returned.push_back(p);
  }
  if (returned.size() == protoReturn.getNumOperands())
    return true;

  // proto returns more from now on; rebuild its calls.
  protoReturn->setOperands(returned);
  proto.setFunctionType(FunctionType::get(proto.getContext(),
                                          proto.getArgumentTypes(),
                                          ValueRange(returned).getTypes()));
  SmallVector<func::CallOp> calls;
  module.walk([&](func::CallOp call) {
    if (call.getCallee() == proto.getName())
      calls.push_back(call);
  });
  for (func::CallOp call : calls) {
    OpBuilder b(call);
    auto wider =
        func::CallOp::create(b, call.getLoc(), proto, call.getOperands());
    for (auto [from, to] : llvm::zip(call.getResults(), wider.getResults()))
      from.replaceAllUsesWith(to);
    call.erase();
  }
  return true;
}

void Outliner::outline(Layer &layer) {
  llvm::SmallPtrSet<Operation *, 32> inSet(layer.ops.begin(), layer.ops.end());
  Operation *last = layer.ops.back();
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Operation *> clones;
  collectInputs(layer.ops, inSet, inputs, clones);
  SmallVector<Value> outputs;
  for (Operation *op : layer.ops)
    for (Value r : op->getResults())
      for (Operation *user : r.getUsers()) {
        Operation *top = func.getBody().front().findAncestorOpInBlock(*user);
        if (inSet.contains(top))
          continue;
        // A result used before the call would be.
        if (top->isBeforeInBlock(last)) {
          LLVM_DEBUG(llvm::dbgs() << layer.name << " stays inline: used by "
                                  << *top << " before its end\n");
          return;
        }
        outputs.push_back(r);
        break;
      }

  // Build the candidate function.
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(func);
  SmallVector<Type> argTypes, resultTypes;
  for (Value v : inputs)
    argTypes.push_back(v.getType());
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  Location loc = layer.ops.front()->getLoc();
  auto fn = func::FuncOp::create(b, loc, (func.getName() + "_layer").str(),
                                 b.getFunctionType(argTypes, resultTypes));
  fn.setPrivate();
  Block *entry = fn.addEntryBlock();
  IRMapping map;
  for (auto [v, arg] : llvm::zip(inputs, entry->getArguments()))
    map.map(v, arg);
  b.setInsertionPointToStart(entry);
  // First the clones that depend on no op of the layer, in first-use order
  // (not block order: constants sit in different places in different
  // functions, and equal layers must give equal bodies); then the other
  // clones and the layer's ops in block order, so that operands come first.
  llvm::SmallPtrSet<Operation *, 16> hoisted;
  SmallVector<Operation *> ordered(layer.ops.begin(), layer.ops.end());
  // An operand is ready if it is an input (an argument) or a hoisted clone.
  auto ready = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return !def || hoisted.contains(def) ||
           (!clones.contains(def) && !inSet.contains(def));
  };
  for (Operation *op : clones) {
    if (llvm::all_of(op->getOperands(), ready)) {
      hoisted.insert(op);
      b.clone(*op, map);
    } else {
      ordered.push_back(op);
    }
  }
  llvm::sort(ordered,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  for (Operation *op : ordered)
    b.clone(*op, map);
  SmallVector<Value> results;
  for (Value v : outputs)
    results.push_back(map.lookup(v));
  func::ReturnOp::create(b, loc, results);

  // Reuse a function with an equal body. Its results may be a superset:
  // the step function's layer returns the caches it updated, the forward
  // function's (fresh caches, unused afterwards) does not; the other way
  // round, the prototype gains the results and its calls are rebuilt.
  SmallVector<unsigned> resultIndex;
  func::FuncOp callee;
  for (func::FuncOp proto : prototypes)
    if (matchBody(proto, fn, resultIndex)) {
      callee = proto;
      break;
    }
  if (callee) {
    fn.erase();
  } else {
    callee = fn;
    symbols.insert(fn); // uniquifies the name
    fn->setAttr("no_inline", b.getUnitAttr());
    // Private to the object: LLVM may specialize it, and it does not clash
    // with another model's layer function at link time.
    fn->setAttr("llvm.linkage", LLVM::LinkageAttr::get(
                                    b.getContext(), LLVM::Linkage::Internal));
    prototypes.push_back(fn);
    resultIndex = llvm::to_vector(llvm::seq<unsigned>(0, outputs.size()));
  }

  b.setInsertionPointAfter(last);
  auto call = func::CallOp::create(b, loc, callee, inputs.getArrayRef());
  Block &body = func.getBody().front();
  for (unsigned i = 0; i < outputs.size(); ++i)
    outputs[i].replaceUsesWithIf(
        call.getResult(resultIndex[i]), [&](OpOperand &use) {
          return !inSet.contains(body.findAncestorOpInBlock(*use.getOwner()));
        });
  for (Operation *op : llvm::reverse(layer.ops)) {
    op->dropAllUses();
    op->erase();
  }
}

struct TfmOutlineLayersPass
    : mlir::tfm::impl::TfmOutlineLayersBase<TfmOutlineLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && func.getBody().hasOneBlock())
        funcs.push_back(func);
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> prototypes;
    for (func::FuncOp func : funcs)
      Outliner(module, func, symbols, prototypes).run();
  }
};

} // namespace
