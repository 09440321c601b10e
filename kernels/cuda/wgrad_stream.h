/* wgrad_stream.h - the weight-grad stream (wgrad_stream.c): a backward's
 * weight and bias grads on a second stream, overlapped with the input grads
 * of the layers below, and the tickets that order the two streams. */
#ifndef TPRT_WGRAD_STREAM_H
#define TPRT_WGRAD_STREAM_H
#include <cuda_runtime.h>
#ifdef __cplusplus
extern "C" {
#endif

/* From here until cuda_wgrad_join(), weight grads are deferred to the second stream when
 * by_default is 1 or TPRT_WGRAD_STREAM=1 (TPRT_WGRAD_STREAM=0: never); 1 when they are (0 also
 * when the stream could not be made). */
int cuda_wgrad_begin(int by_default);
/* The compute stream waits for every deferred weight grad; the deferral ends.  0, or -1. */
int cuda_wgrad_join(void);
/* The ticket of the last deferred weight grad (0: none, or not deferring). */
long cuda_wgrad_last(void);
/* The compute stream waits until that weight grad is done (and every one before it).  0, or -1. */
int cuda_wgrad_wait(long ticket);

/* 1 between a cuda_wgrad_begin() that returned 1 and the join. */
int cuda_wgrad_deferring(void);
/* For matmul.cu: the stream a weight grad is to run on (the compute stream, 0, when not
 * deferring), its inputs marked ready there; cuda_wgrad_close() after it issues its ticket. */
cudaStream_t cuda_wgrad_open(void);
int cuda_wgrad_close(void);

#ifdef __cplusplus
}
#endif
#endif
