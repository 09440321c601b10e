/* ring.c - the lock-light multi-producer, single-consumer event ring.
 * Producers reserve consecutive 64-byte slots with one CAS on `head`, copy
 * their record in (no malloc), then publish it by storing its position in
 * the first slot's sequence word.  The writer consumes in order and frees
 * slots by advancing `tail`.  A full ring drops the event (counted).
 * The ring is mapped on the first record, not at load (a process that
 * records nothing reserves nothing), at TPA_RING_SLOTS slots or less under a
 * finite RLIMIT_AS, and MADV_WIPEONFORK so a fork copies none of it.  It
 * calls no other file of the shim but run_state.c (counters, tpa_disable). */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "shim_internal.h"

enum { RING_NONE, RING_MAPPING, RING_READY, RING_FAILED };
static _Atomic int g_ring_state;
static unsigned char *g_ring;
static _Atomic uint64_t *g_seq;
static uint64_t g_slots, g_bytes, g_map_len;
static int g_wiped_on_fork;
static _Atomic uint64_t g_head __attribute__((aligned(64)));
static _Atomic uint64_t g_tail __attribute__((aligned(64)));
static _Atomic int g_enqueued; /* 1 once any record was offered */
/* 1 + the position this thread reserved and has not published yet: a signal
 * handler that flushes must not wait for a record it interrupted. */
static __thread uint64_t t_pending __attribute__((tls_model("initial-exec")));

uint64_t tpa_ring_flush_target(void) { return t_pending ? t_pending - 1 : tpa_ring_head(); }

uint64_t tpa_ring_head(void) { return atomic_load_explicit(&g_head, memory_order_acquire); }
uint64_t tpa_ring_tail(void) { return atomic_load_explicit(&g_tail, memory_order_acquire); }
int tpa_ring_used(void) { return atomic_load(&g_enqueued); }

/* Slots for this process: the default, or 1/32 of a finite address-space
 * limit, never under TPA_RING_MIN_SLOTS. */
static uint64_t ring_slots(void) {
    uint64_t slots = TPA_RING_SLOTS;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        while (slots > TPA_RING_MIN_SLOTS && slots * (TPA_SLOT + 8) > rl.rlim_cur / 32) slots /= 2;
    return slots;
}

static int ring_map(void) {
    for (uint64_t slots = ring_slots(); slots >= TPA_RING_MIN_SLOTS; slots /= 2) {
        size_t len = (size_t)(slots * (TPA_SLOT + 8));
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) continue;
        g_wiped_on_fork = madvise(p, len, MADV_WIPEONFORK) == 0;
        g_ring = p;
        g_seq = (_Atomic uint64_t *)(void *)((unsigned char *)p + slots * TPA_SLOT);
        g_slots = slots;
        g_bytes = slots * TPA_SLOT;
        g_map_len = len;
        return 0;
    }
    return -1;
}

int tpa_ring_ensure(void) {
    for (;;) {
        int st = atomic_load_explicit(&g_ring_state, memory_order_acquire);
        if (st == RING_READY) return 0;
        if (st == RING_FAILED) return TPAUDIT_EDISABLED;
        if (st == RING_NONE) {
            int expect = RING_NONE;
            if (!atomic_compare_exchange_strong(&g_ring_state, &expect, RING_MAPPING)) continue;
            int ok = ring_map() == 0;
            atomic_store_explicit(&g_ring_state, ok ? RING_READY : RING_FAILED, memory_order_release);
            if (!ok) tpa_disable("cannot map the event ring (address-space limit?)");
            return ok ? 0 : TPAUDIT_EDISABLED;
        }
        sched_yield();
    }
}

/* In a fork child: a wiped mapping is already zero; otherwise it is
 * unmapped and a fresh one is made on the child's first record. */
void tpa_ring_reset_in_child(void) {
    if (atomic_load(&g_ring_state) == RING_READY && !g_wiped_on_fork) {
        munmap(g_ring, g_map_len);
        g_ring = NULL;
        g_seq = NULL;
        atomic_store(&g_ring_state, RING_NONE);
    } else if (atomic_load(&g_ring_state) != RING_READY) {
        atomic_store(&g_ring_state, RING_NONE);
    }
    atomic_store(&g_head, 0);
    atomic_store(&g_tail, 0);
    atomic_store(&g_enqueued, 0);
}

static void ring_put(uint64_t byte_pos, const void *src, uint32_t n) {
    uint64_t off = byte_pos % g_bytes;
    uint64_t first = g_bytes - off;
    if (first >= n) {
        memcpy(g_ring + off, src, n);
    } else {
        memcpy(g_ring + off, src, first);
        memcpy(g_ring, (const unsigned char *)src + first, n - first);
    }
}

static void ring_get(uint64_t byte_pos, void *dst, uint32_t n) {
    uint64_t off = byte_pos % g_bytes;
    uint64_t first = g_bytes - off;
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
        if (h + k - t > g_slots) {
            if (waited >= wait_ms * 10) return TPAUDIT_EDROPPED;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
            waited++;
            h = atomic_load_explicit(&g_head, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&g_head, &h, h + k, memory_order_acq_rel, memory_order_relaxed)) {
            *pos = h;
            return 0;
        }
    }
}

int tpa_ring_put(int type, const void *fixed, uint32_t fixed_len, const char *const *strs, const uint32_t *caps,
                 int nstr, const uint64_t *ips, int nips, int wait_ms) {
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
    if (atomic_load_explicit(&g_ring_state, memory_order_acquire) != RING_READY) return TPAUDIT_EDISABLED;
    if (!atomic_load_explicit(&g_enqueued, memory_order_relaxed)) atomic_store(&g_enqueued, 1);
    uint32_t k = (total + TPA_SLOT - 1) / TPA_SLOT;
    uint64_t pos;
    if (reserve(k, &pos, wait_ms) != 0) {
        tpa_run_count_dropped();
        return TPAUDIT_EDROPPED;
    }
    t_pending = pos + 1;
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
    atomic_store_explicit(&g_seq[pos % g_slots], pos + 1, memory_order_release);
    t_pending = 0;
    return 0;
}

int tpa_ring_pop(void *buf, struct tpa_rec_view *v) {
    if (atomic_load_explicit(&g_ring_state, memory_order_acquire) != RING_READY) return 0;
    uint64_t t = atomic_load_explicit(&g_tail, memory_order_relaxed);
    if (atomic_load_explicit(&g_seq[t % g_slots], memory_order_acquire) != t + 1) return 0;
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
