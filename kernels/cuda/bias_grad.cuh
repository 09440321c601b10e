/* bias_grad.cuh - the standalone kernels of a linear layer's bias gradient,
 * dbias[o] += sum over rows r of dout[r * ld + o] (bf16 dout, fp32 dbias),
 * included by matmul.cu only.  Two reductions: the column kernel (a thread
 * per column over a chunk of rows; any OC and ld), and the tile kernel
 * (a block of 32 x 8 threads covers 256 columns, each thread eight columns
 * with 128-bit loads over every eighth row of the block's row chunk; the
 * eight row lanes are summed by common.cuh's add_block_column_sums, one
 * atomic add a column a block; OC and ld multiples of 8, dout 16-byte
 * aligned).
 * bias_acc_k adds a bias grad that a GEMM epilogue wrote (=) into the
 * accumulated one (+=). */
#ifndef TPRT_BIAS_GRAD_CUH
#define TPRT_BIAS_GRAD_CUH
#include "common.cuh"

/* columns by x, row chunks by y; one atomic per (column, chunk) */
__global__ void bias_bwd_k(float *dbias, const bf16 *dout, int BT, int OC, int ld, int rows_per) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    int r0 = blockIdx.y * rows_per, r1 = min(BT, r0 + rows_per);
    float s = 0.0f;
    for (int r = r0; r < r1; r++) s += ldf(dout, (size_t)r * ld + o);
    atomicAdd(&dbias[o], s);
}

#define BG_COLS 256 /* columns of a tile block: 32 threads x 8 */

__device__ __forceinline__ void add8(float s[8], uint4 v) {
    float f[8];
    unpack8(v, f);
#pragma unroll
    for (int j = 0; j < 8; j++) s[j] += f[j];
}

__global__ void __launch_bounds__(BG_COLS)
    bias_bwd_tile_k(float *dbias, const bf16 *dout, int BT, int OC, int ld, int rows_per) {
    int tx = threadIdx.x, ty = threadIdx.y;
    int c0 = blockIdx.x * BG_COLS + tx * 8;
    int r0 = blockIdx.y * rows_per, r1 = min(BT, r0 + rows_per);
    float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (c0 < OC) {
        const bf16 *p = dout + c0;
        int r = r0 + ty;
        for (; r + 3 * COL_LANES < r1; r += 4 * COL_LANES) { /* four independent loads in flight */
            uint4 v0 = ld_vec8(p + (size_t)r * ld), v1 = ld_vec8(p + (size_t)(r + COL_LANES) * ld);
            uint4 v2 = ld_vec8(p + (size_t)(r + 2 * COL_LANES) * ld),
                  v3 = ld_vec8(p + (size_t)(r + 3 * COL_LANES) * ld);
            add8(s, v0), add8(s, v1), add8(s, v2), add8(s, v3);
        }
        for (; r < r1; r += COL_LANES) add8(s, ld_vec8(p + (size_t)r * ld));
    }
    add_block_column_sums(dbias, s, blockIdx.x * BG_COLS, OC);
}

__global__ void bias_acc_k(float *dbias, const float *add, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dbias[i] += add[i];
}

static int bias_grad_column(float *dbias, const bf16 *dout, int BT, int OC, int ld, cudaStream_t st) {
    int rows_per = 64;
    dim3 grid(grid_for((size_t)OC, 128), grid_for((size_t)BT, rows_per));
    bias_bwd_k<<<grid, 128, 0, st>>>(dbias, dout, BT, OC, ld, rows_per);
    return launch_ok();
}

static bool bias_grad_tile_fits(const bf16 *dout, int OC, int ld) {
    return OC % 8 == 0 && ld % 8 == 0 && aligned16(dout);
}

/* About eight blocks per SM in all, each over at least 64 rows (a multiple of 32). */
static int bias_grad_tile(float *dbias, const bf16 *dout, int BT, int OC, int ld, cudaStream_t st) {
    unsigned cols = grid_for((size_t)OC, BG_COLS);
    long rows_per = column_block_rows(BT, cols, 64, 32);
    dim3 grid(cols, grid_for((size_t)BT, (int)rows_per)), block(32, COL_LANES);
    bias_bwd_tile_k<<<grid, block, 0, st>>>(dbias, dout, BT, OC, ld, (int)rows_per);
    return launch_ok();
}

static int bias_grad_acc(float *dbias, const float *add, int n, cudaStream_t st) {
    bias_acc_k<<<grid_for((size_t)n, 256), 256, 0, st>>>(dbias, add, n);
    return launch_ok();
}
#endif
