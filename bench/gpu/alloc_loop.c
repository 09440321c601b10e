/* alloc_loop.c - allocation-heavy microbenchmark: N cudaMalloc/cudaFree
 * pairs of 1 MiB, timed on the host; run with and without the shim to get
 * the cost per traced allocation. Prints "ns_per_pair <value>". */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    int pairs = argc > 1 ? atoi(argv[1]) : 100000;
    void *p;
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess) {
        fprintf(stderr, "no CUDA device\n");
        return 77;
    }
    cudaFree(p);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < pairs; i++) {
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            fprintf(stderr, "failed at %d\n", i);
            return 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / pairs;
    printf("ns_per_pair %.1f\n", ns);
    return 0;
}
