"""relu: a CUDA kernel built with torch.utils.cpp_extension.load_inline (judged on a GPU only).

Each thread handles four floats through one 16-byte vector load and store; a scalar tail covers
sizes that are not multiples of four. Bytes moved: 4 read + 4 written per element.
"""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long stride = (long)gridDim.x * blockDim.x;
    for (; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}

__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "fp32 contiguous CUDA input");
    auto y = torch::empty_like(x);
    long n = x.numel();
    long n4 = n / 4;
    if (n4 > 0) {
        int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
        relu_vec4<<<blocks, 256>>>(reinterpret_cast<const float4*>(x.data_ptr<float>()),
                                    reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
    }
    if (n > n4 * 4) {
        relu_tail<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_source = "torch::Tensor relu(torch::Tensor x);"

relu_ext = load_inline(
    name="kernelevo_test_relu",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu(x.contiguous())
