/* residual.cu - residual connection out = a + b and its (accumulating)
 * backward; eight bf16 per thread with 128-bit loads and stores when n % 8
 * == 0 and every pointer is 16-byte aligned, else one per thread. */
#include "common.cuh"

#define RES_THREADS 256

/* VEC: element i is the 8-wide group i */
template <bool VEC>
__global__ void __launch_bounds__(RES_THREADS) residual_fwd_k(bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!VEC) {
        out[i] = tobf(ldf(a, i) + ldf(b, i));
        return;
    }
    float x[8], y[8];
    unpack8(ld_vec8(a + 8 * i), x);
    unpack8(ld_vec8(b + 8 * i), y);
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] += y[k];
    st_vec8(out + 8 * i, pack8(x));
}
template <bool VEC>
__global__ void __launch_bounds__(RES_THREADS) residual_bwd_k(bf16 *da, bf16 *db, const bf16 *dout, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (!VEC) {
        float g = ldf(dout, i);
        da[i] = tobf(ldf(da, i) + g);
        db[i] = tobf(ldf(db, i) + g);
        return;
    }
    float g[8], x[8], y[8];
    unpack8(ld_vec8(dout + 8 * i), g);
    unpack8(ld_vec8(da + 8 * i), x);
    unpack8(ld_vec8(db + 8 * i), y);
#pragma unroll
    for (int k = 0; k < 8; k++) x[k] += g[k], y[k] += g[k];
    st_vec8(da + 8 * i, pack8(x));
    st_vec8(db + 8 * i, pack8(y));
}

extern "C" int cuda_residual_forward(tprt_bf16 *out, const tprt_bf16 *a, const tprt_bf16 *b, size_t n) {
    if (!n) return launch_ok();
    if (n % 8 == 0 && aligned16(out) && aligned16(a) && aligned16(b))
        residual_fwd_k<true><<<grid_for(n / 8, RES_THREADS), RES_THREADS>>>(BF(out), CBF(a), CBF(b), n / 8);
    else
        residual_fwd_k<false><<<grid_for(n, RES_THREADS), RES_THREADS>>>(BF(out), CBF(a), CBF(b), n);
    return launch_ok();
}
extern "C" int cuda_residual_backward(tprt_bf16 *da, tprt_bf16 *db, const tprt_bf16 *dout, size_t n) {
    if (!n) return launch_ok();
    if (n % 8 == 0 && aligned16(da) && aligned16(db) && aligned16(dout))
        residual_bwd_k<true><<<grid_for(n / 8, RES_THREADS), RES_THREADS>>>(BF(da), BF(db), CBF(dout), n / 8);
    else
        residual_bwd_k<false><<<grid_for(n, RES_THREADS), RES_THREADS>>>(BF(da), BF(db), CBF(dout), n);
    return launch_ok();
}
