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

#include "tpaudit.h"

#define TABLE_BYTES (32 << 20)

__attribute__((noinline)) static float *allocate_model_table(void) {
    void *p = NULL;
    return cudaMalloc(&p, TABLE_BYTES) == cudaSuccess ? p : NULL;
}

static void audit_stale_table(const float *table) {
    int64_t audit = tpaudit_audit_begin("lib_probe", 1);
    int64_t shape[2] = {TABLE_BYTES / 4 / 1024, 1024};
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = 1;
    t.name = "probe.table";
    t.ndim = 2;
    t.shape = shape;
    t.dtype = "float32";
    t.device = "cuda:0";
    t.storage_ptr = (uint64_t)(size_t)table;
    t.storage_bytes = TABLE_BYTES;
    t.nbytes = TABLE_BYTES;
    t.requires_grad = 1;
    tpaudit_record_tensor(&t);
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = TPAUDIT_HOLDER_OPTIMIZER;
    r.holder_class = "probe.Optimizer";
    r.holder_id = 1;
    r.path = "param_groups[0].params[0]";
    r.role = TPAUDIT_ROLE_GROUP_PARAM;
    r.tensor_key = 1;
    tpaudit_record_ref(&r);
    tpaudit_audit_end(audit);
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
