/* lib_probe.c - a CUDA program whose device memory comes from three owners:
 * its own 32 MiB "model table" (cudaMalloc in allocate_model_table), cuBLAS
 * (a handle and an SGEMM, cuBLAS allocating its own workspace) and NCCL (a
 * one-rank communicator and an all-reduce).  An optimizer holds the table
 * at the audit, which is taken while all three are alive, so the report
 * must put NCCL's and cuBLAS's memory under their libraries and only the
 * table under the program.  Exit 77 without a usable GPU. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>

#include "probe_audit.h"

#define TABLE_BYTES (32 << 20)

__attribute__((noinline)) static float *allocate_model_table(void) {
    void *p = NULL;
    return cudaMalloc(&p, TABLE_BYTES) == cudaSuccess ? p : NULL;
}

static void audit_stale_table(const float *table) {
    int64_t shape[2] = {TABLE_BYTES / 4 / 1024, 1024};
    probe_audit_stale_table("lib_probe", table, TABLE_BYTES, 2, shape);
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("skip: no CUDA device\n");
        return 77;
    }
    float *table = allocate_model_table();
    if (!table) return 1;
    enum { N = 1024 };
    float *a = NULL, *c = NULL;
    if (cudaMalloc((void **)&a, N * N * 4) != cudaSuccess || cudaMalloc((void **)&c, N * N * 4) != cudaSuccess)
        return 1;
    cublasHandle_t blas;
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 1;
    const float one = 1.0f, zero = 0.0f;
    if (cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, a, N, &zero, c, N) != CUBLAS_STATUS_SUCCESS)
        return 1;
    ncclComm_t comm;
    int dev0 = 0;
    if (ncclCommInitAll(&comm, 1, &dev0) != ncclSuccess) return 1;
    if (ncclAllReduce(a, c, N * N, ncclFloat, ncclSum, comm, 0) != ncclSuccess) return 1;
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    audit_stale_table(table);
    ncclCommDestroy(comm);
    cublasDestroy(blas);
    cudaFree(a);
    cudaFree(c);
    cudaFree(table);
    printf("lib_probe: table %p, cuBLAS SGEMM and NCCL all-reduce done\n", (void *)table);
    return 0;
}
