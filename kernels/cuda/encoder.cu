/* encoder.cu - vocab-parallel token embedding (a rank holds wte rows
 * [v0, v0+vl); other tokens give 0) and position embedding, forward and
 * backward (grads accumulate in fp32). */
#include "common.cuh"

__global__ void encoder_fwd_k(bf16 *out, const int *tok, const bf16 *wte, int v0, int vl, int BT, int C) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C), r = tok[bt] - v0;
    out[i] = (r >= 0 && r < vl) ? wte[(size_t)r * C + c] : tobf(0.0f);
}
__global__ void encoder_bwd_k(float *dwte, const bf16 *dout, const int *tok, int v0, int vl, int BT, int C) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int bt = (int)(i / C), c = (int)(i % C), r = tok[bt] - v0;
    if (r >= 0 && r < vl) atomicAdd(&dwte[(size_t)r * C + c], ldf(dout, i));
}
__global__ void pos_fwd_k(bf16 *out, const bf16 *wpe, int BT, int T, int C) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)BT * C) return;
    int t = (int)((i / C) % T), c = (int)(i % C);
    out[i] = tobf(ldf(out, i) + ldf(wpe, (size_t)t * C + c));
}
/* one thread per (t, c): sums the B rows in a fixed order */
__global__ void pos_bwd_k(float *dwpe, const bf16 *dout, int B, int T, int C) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    float s = 0.0f;
    for (int b = 0; b < B; b++) s += ldf(dout, (size_t)b * T * C + i);
    dwpe[i] += s;
}

extern "C" int cuda_encoder_forward(tprt_bf16 *out, const int *tok, const tprt_bf16 *wte, int v0, int vl, int BT,
                                    int C) {
    size_t n = (size_t)BT * C;
    if (n) encoder_fwd_k<<<grid_for(n, 256), 256>>>(BF(out), tok, CBF(wte), v0, vl, BT, C);
    return launch_ok();
}
extern "C" int cuda_encoder_backward(float *dwte, const tprt_bf16 *dout, const int *tok, int v0, int vl, int BT,
                                     int C) {
    size_t n = (size_t)BT * C;
    if (n) encoder_bwd_k<<<grid_for(n, 256), 256>>>(dwte, CBF(dout), tok, v0, vl, BT, C);
    return launch_ok();
}
extern "C" int cuda_pos_forward(tprt_bf16 *out, const tprt_bf16 *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    if (n) pos_fwd_k<<<grid_for(n, 256), 256>>>(BF(out), CBF(wpe), B * T, T, C);
    return launch_ok();
}
extern "C" int cuda_pos_backward(float *dwpe, const tprt_bf16 *dout, int B, int T, int C) {
    size_t n = (size_t)T * C;
    if (n) pos_bwd_k<<<grid_for(n, 256), 256>>>(dwpe, CBF(dout), B, T, C);
    return launch_ok();
}
