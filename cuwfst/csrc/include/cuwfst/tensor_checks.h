// Host-side checks of the tensors the bindings receive (tvm-ffi TensorView): one
// definition for the CPU reference module and the GPU module.
#pragma once

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>

#include <cstdint>
#include <vector>

namespace cuwfst {

inline bool IsType(DLDataType a, uint8_t code, uint8_t bits) {
  return a.code == code && a.bits == bits && a.lanes == 1;
}

// A dense host tensor of dtype {code, bits} and `shape` (-1: any extent), else a clear error.
// Dense as C-contiguous is meant for memory access: the stride of a dim of extent 1 is never
// used, and a tensor with no elements is dense whatever its strides (numpy 2 gives an empty
// array such as np.zeros((0, 3)) the strides (0, 0), so a [0, 3] output of a decode with no
// lattice records failed the stride test).
inline void CheckHostTensor(const tvm::ffi::TensorView& t, const char* name, uint8_t code,
                            uint8_t bits, const std::vector<int64_t>& shape) {
  if (t.device().device_type != kDLCPU && t.device().device_type != kDLCUDAHost)
    TVM_FFI_THROW(ValueError) << name << " must be a CPU tensor";
  if (!IsType(t.dtype(), code, bits))
    TVM_FFI_THROW(TypeError) << name << " must be " << (code == kDLFloat ? "float" : "int") << int(bits);
  if (t.ndim() != static_cast<int32_t>(shape.size()))
    TVM_FFI_THROW(ValueError) << name << " must have " << shape.size() << " dims, got " << t.ndim();
  bool empty = false;
  for (int i = 0; i < t.ndim(); ++i) {
    if (shape[i] >= 0 && t.shape()[i] != shape[i])
      TVM_FFI_THROW(ValueError) << name << " dim " << i << " is " << t.shape()[i] << ", expected " << shape[i];
    if (t.shape()[i] < 0) TVM_FFI_THROW(ValueError) << name << " dim " << i << " is negative";
    empty = empty || t.shape()[i] == 0;
  }
  if (empty) return;
  int64_t stride = 1;
  for (int i = t.ndim() - 1; i >= 0; --i) {
    if (t.shape()[i] > 1 && t.strides()[i] != stride)
      TVM_FFI_THROW(ValueError) << name << " must be dense (contiguous)";
    stride *= t.shape()[i];
  }
}

}  // namespace cuwfst
