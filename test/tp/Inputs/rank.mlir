// Input of link.test: the output is the input plus this process's rank, read
// from the runtime's tensor-parallel side (tfm_tp_rank).
func.func private @tfm_tp_rank() -> i32
func.func @rank(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %r = func.call @tfm_tp_rank() : () -> i32
  %f = arith.sitofp %r : i32 to f32
  %t = tensor.splat %f : tensor<1x4xf32>
  %y = arith.addf %x, %t : tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}
