/* cast.cu - fp32 <-> bf16 conversion on the device (uploads, tests). */
#include "common.cuh"

__global__ void f32_to_bf16_k(bf16 *out, const float *in, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = tobf(in[i]);
}
__global__ void bf16_to_f32_k(float *out, const bf16 *in, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = ldf(in, i);
}
extern "C" int cuda_f32_to_bf16(tprt_bf16 *out, const float *in, size_t n) {
    if (n) f32_to_bf16_k<<<grid_for(n, 256), 256>>>(BF(out), in, n);
    return launch_ok();
}
extern "C" int cuda_bf16_to_f32(float *out, const tprt_bf16 *in, size_t n) {
    if (n) bf16_to_f32_k<<<grid_for(n, 256), 256>>>(out, CBF(in), n);
    return launch_ok();
}
