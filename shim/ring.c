/* ring.c - the lock-light multi-producer, single-consumer event ring.
 * Producers reserve consecutive 64-byte slots with one CAS on `head`, copy
 * their record in (no malloc), then publish it by storing its position in
 * the first slot's sequence word.  The writer consumes in order and frees
 * slots by advancing `tail`.  A full ring drops the event (counted). */
#include <string.h>
#include <time.h>

#include "shim_core.h"

static unsigned char g_ring[TPA_RING_SLOTS * TPA_SLOT] __attribute__((aligned(64)));
static _Atomic uint64_t g_seq[TPA_RING_SLOTS];
static _Atomic uint64_t g_head __attribute__((aligned(64)));
static _Atomic uint64_t g_tail __attribute__((aligned(64)));

uint64_t tpa_ring_head(void) { return atomic_load_explicit(&g_head, memory_order_acquire); }
uint64_t tpa_ring_tail(void) { return atomic_load_explicit(&g_tail, memory_order_acquire); }

void tpa_ring_reset(void) {
    atomic_store(&g_head, 0);
    atomic_store(&g_tail, 0);
    for (uint32_t i = 0; i < TPA_RING_SLOTS; i++) atomic_store_explicit(&g_seq[i], 0, memory_order_relaxed);
}

static void ring_put(uint64_t byte_pos, const void *src, uint32_t n) {
    uint64_t off = byte_pos % sizeof g_ring;
    uint64_t first = sizeof g_ring - off;
    if (first >= n) {
        memcpy(g_ring + off, src, n);
    } else {
        memcpy(g_ring + off, src, first);
        memcpy(g_ring, (const unsigned char *)src + first, n - first);
    }
}

static void ring_get(uint64_t byte_pos, void *dst, uint32_t n) {
    uint64_t off = byte_pos % sizeof g_ring;
    uint64_t first = sizeof g_ring - off;
    if (first >= n) {
        memcpy(dst, g_ring + off, n);
    } else {
        memcpy(dst, g_ring + off, first);
        memcpy((unsigned char *)dst + first, g_ring, n - first);
    }
}

static int reserve(uint32_t k, uint64_t *pos, int wait_ms) {
    uint64_t h = atomic_load_explicit(&g_head, memory_order_relaxed);
    int waited = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&g_tail, memory_order_acquire);
        if (h + k - t > TPA_RING_SLOTS) {
            if (waited >= wait_ms * 10) return TPAUDIT_EDROPPED;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            waited++;
            h = atomic_load_explicit(&g_head, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&g_head, &h, h + k, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
            *pos = h;
            return 0;
        }
    }
}

int tpa_enqueue(int type, const void *fixed, uint32_t fixed_len, const char *const *strs,
                const uint32_t *caps, int nstr, const uint64_t *ips, int nips, int wait_ms) {
    uint32_t lens[TPA_REC_MAX_STR];
    uint32_t total = (uint32_t)sizeof(struct tpa_rec_hdr) + fixed_len + 8u * (uint32_t)nips;
    for (int i = 0; i < nstr; i++) {
        if (!strs[i]) {
            lens[i] = UINT32_MAX;
            total += 4;
            continue;
        }
        size_t l = strnlen(strs[i], caps[i] + 1);
        if (l > caps[i]) {
            l = caps[i];
            tpa_run_count_truncated();
        }
        lens[i] = (uint32_t)l;
        total += 4 + (uint32_t)l;
    }
    if (total > TPA_REC_MAX) return TPAUDIT_EINVAL;
    uint32_t k = (total + TPA_SLOT - 1) / TPA_SLOT;
    uint64_t pos;
    if (reserve(k, &pos, wait_ms) != 0) {
        tpa_run_count_dropped();
        return TPAUDIT_EDROPPED;
    }
    struct tpa_rec_hdr h = {k, (uint16_t)type, (uint8_t)nstr, 0, fixed_len, (uint32_t)nips};
    uint64_t b = pos * TPA_SLOT;
    ring_put(b, &h, sizeof h);
    b += sizeof h;
    ring_put(b, fixed, fixed_len);
    b += fixed_len;
    if (nips) {
        ring_put(b, ips, 8u * (uint32_t)nips);
        b += 8u * (uint32_t)nips;
    }
    for (int i = 0; i < nstr; i++) {
        ring_put(b, &lens[i], 4);
        b += 4;
        if (lens[i] != UINT32_MAX) {
            ring_put(b, strs[i], lens[i]);
            b += lens[i];
        }
    }
    atomic_store_explicit(&g_seq[pos % TPA_RING_SLOTS], pos + 1, memory_order_release);
    return 0;
}

int tpa_ring_pop(void *buf, struct tpa_rec_view *v) {
    uint64_t t = atomic_load_explicit(&g_tail, memory_order_relaxed);
    if (atomic_load_explicit(&g_seq[t % TPA_RING_SLOTS], memory_order_acquire) != t + 1) return 0;
    struct tpa_rec_hdr h;
    ring_get(t * TPA_SLOT, &h, sizeof h);
    ring_get(t * TPA_SLOT, buf, h.nslots * TPA_SLOT);
    atomic_store_explicit(&g_tail, t + h.nslots, memory_order_release);
    unsigned char *p = (unsigned char *)buf + sizeof h;
    v->type = h.type;
    v->fixed = p;
    p += h.fixed_len;
    v->nips = (int)h.nips;
    v->ips = (const uint64_t *)p;
    p += 8u * h.nips;
    for (int i = 0; i < h.nstr && i < TPA_REC_MAX_STR; i++) {
        uint32_t l;
        memcpy(&l, p, 4);
        p += 4;
        if (l == UINT32_MAX) {
            v->str[i] = NULL;
            v->slen[i] = 0;
        } else {
            v->str[i] = (const char *)p;
            v->slen[i] = (int)l;
            p += l;
        }
    }
    return 1;
}
