/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/remote_abi.h: the rail ABI and proxy records (spec 000, Rig_remote_abi).
 *
 * Concepts.
 *
 * A *rail* carries a fixed array of byte transfers between host memory on
 * two machines, again and again.  Each machine holds one *end*: an outbound
 * landing area (what it sends), an inbound landing area (what it receives),
 * each in two copies back to back, and three 64-bit counts, `ready` and
 * `sent` for what it sends and `arrived` for what it receives, at bytes
 * RIG_READY_AT, RIG_SENT_AT and RIG_ARRIVED_AT of the counts area, each alone
 * in its cache line.  Counts start at 0 and only grow.
 *
 * In a direction of n transfers, count 1 <= c < INT64_MAX names run
 * r = (c - 1) / n and transfer j = (c - 1) % n; the run uses copy r % 2 of
 * each landing area.  The sender writes transfer j's bytes at its src in copy
 * k of its outbound and calls rig_end_ready(e, c); the rail moves them to dst
 * in copy k of the receiver's inbound, stores `arrived` = c there (release),
 * and stores `sent` = c at the sender once the source may be written again.
 * Waiting for `arrived` >= c (acquire) and then reading is race-free.
 *
 * RIG_COUNT_FAILED (INT64_MAX) is reserved for failure: when the job fails,
 * every count of every live end is raised to it and stays there, so that no
 * wait blocks.  What the landing areas hold then is unspecified.
 *
 * Lifetimes (the spec's garbage collector as reference counts): a rail and
 * its local end share one reference count, so either keeps both alive.  When
 * the last reference goes, the provider's release hook runs exactly once,
 * from whichever thread dropped it.
 *
 * Errors: a fallible function returns false and, when err is not NULL, sets
 * *err to a malloc'd message the caller frees; it starts with a reason word
 * ("invalid:", "failed:", "foreign:", "unsupported:", "system:", "nomem:",
 * "timeout:") and names the culprit.  Outputs are set only on success.
 *
 * This header and its implementation (src/abi/) depend on libc only. */
#ifndef RIG_REMOTE_ABI_H
#define RIG_REMOTE_ABI_H

#include <rig/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- areas and transfers ------------------------------------------------ */

/* Host memory of an end: base and length in bytes. */
typedef struct {
    uint8_t *base;
    size_t len;
} rig_area;

/* One transfer, the same bytes at the same places in every run: length
 * bytes from src in a copy of the sender's outbound to dst in the same copy
 * of the receiver's inbound. */
typedef struct {
    int64_t src;
    int64_t dst;
    int64_t length;
} rig_transfer;

/* The largest src + length and dst + length a transfer may have: 2^60. */
#define RIG_TRANSFER_LIMIT ((int64_t)1 << 60)

/* Byte offsets of the counts in an end's counts area, and its size. */
#define RIG_READY_AT 0
#define RIG_SENT_AT 128
#define RIG_ARRIVED_AT 256
#define RIG_COUNTS_BYTES 384
/* A count at this value means the job failed. */
#define RIG_COUNT_FAILED ((uint64_t)INT64_MAX)
/* Each copy of a landing area is a multiple of this many bytes. */
#define RIG_COPY_ALIGN 256

/* True iff a rail can carry send and receive: they are not both empty, every
 * length is >= 1, every src and dst >= 0, and src + length and dst + length
 * are at most 2^60 (no overflow).  Otherwise false with *why naming the list
 * and index: "invalid: receive[2] has length 0".  A list pointer may be NULL
 * only with a count of 0.  Pure: any thread. */
RIG_API bool rig_check_transfers(const rig_transfer *send, size_t nsend,
                                 const rig_transfer *receive, size_t nreceive,
                                 char **why);

/* ---- layout ------------------------------------------------------------- */

/* Which offset of the transfers a landing area is indexed by. */
typedef enum {
    RIG_BY_SRC, /* a sender's outbound */
    RIG_BY_DST  /* a receiver's inbound */
} rig_side;

/* Bytes in one copy of a landing area for transfers t[0..n): the largest
 * src + length (RIG_BY_SRC) or dst + length (RIG_BY_DST), rounded up to a
 * multiple of RIG_COPY_ALIGN; 0 when n is 0.  The transfers must have passed
 * rig_check_transfers. */
RIG_API size_t rig_copy_bytes(const rig_transfer *t, size_t n, rig_side side);

/* Copy k (0 or 1) of a landing area of two copies back to back; an empty
 * area for an empty one or k > 1. */
RIG_API rig_area rig_area_copy(rig_area two_copies, unsigned k);

/* Where one end's three areas sit in a single allocation: the counts area
 * first, then outbound (two copies), then inbound (two copies), each
 * starting on a page.  Lengths are the spec's; an empty direction has
 * length 0 (its offset is still page-aligned). */
typedef struct {
    size_t counts_at, counts_len;
    size_t outbound_at, outbound_len;
    size_t inbound_at, inbound_len;
    size_t total; /* bytes to allocate, a multiple of the page */
} rig_end_layout;

/* The layout of the end that sends send[0..nsend) and receives
 * receive[0..nreceive), for pages of page bytes (a power of two; 0: the
 * system's).  False with "invalid: ..." if the lists fail
 * rig_check_transfers or the page is not a power of two. */
RIG_API bool rig_end_layout_make(const rig_transfer *send, size_t nsend,
                                 const rig_transfer *receive, size_t nreceive,
                                 size_t page, rig_end_layout *out, char **err);

/* ---- count arithmetic --------------------------------------------------- */

/* For a valid count 1 <= c < INT64_MAX in a direction of n >= 1 transfers:
 * its run (c - 1) / n, its transfer (c - 1) % n, and the copy (run % 2) of
 * each landing area it uses.  Invalid arguments give UINT64_MAX, SIZE_MAX
 * and UINT32_MAX respectively.  Pure. */
RIG_API uint64_t rig_count_run(uint64_t c, size_t n);
RIG_API size_t rig_count_transfer(uint64_t c, size_t n);
RIG_API unsigned rig_count_copy(uint64_t c, size_t n);
/* The count of transfer j of run r: r * n + j + 1; 0 when j >= n, n == 0 or
 * the result would reach INT64_MAX. */
RIG_API uint64_t rig_count_of(uint64_t run, size_t j, size_t n);

/* The first count a carrier must carry when `ready` moved past `carried`
 * (the last count it carried) in a direction of n >= 1 transfers: carried
 * + 1, or, when more than two runs were readied at once, the first count
 * of the last 2 * n.  Every count before it is followed, within the
 * readied counts, by a count of the same transfer and the same copy (run
 * + 2) that overwrites its bytes at the source and at the destination, so
 * a carrier that carries from here up to ready in order moves the same
 * bytes as one that carries every count -- and costs O(n) per wake, not
 * O(runs readied): a jump of ready to INT64_MAX - 1 carries 2 * n
 * transfers.  0 for invalid arguments (n == 0, ready <= carried or ready
 * >= INT64_MAX).  Pure.  For providers. */
RIG_API uint64_t rig_count_carry_from(uint64_t carried, uint64_t ready,
                                      size_t n);

/* Acquire load of the count at byte `at` (RIG_*_AT) of a counts area. */
RIG_API uint64_t rig_count_load(const void *counts, size_t at);
/* Raises the count at `at` to c with release order; never lowers it and
 * never moves it off RIG_COUNT_FAILED.  Returns the value it held before.
 * For providers (sent, arrived) and for ready_fn implementations. */
RIG_API uint64_t rig_count_advance(void *counts, size_t at, uint64_t c);

/* ---- ends --------------------------------------------------------------- */

typedef struct rig_end rig_end;
typedef struct rig_rail rig_rail;

/* The C ready function of an end (the spec's ready_fn): called with the
 * host address of the end's counts area. */
typedef void (*rig_ready_fn)(void *counts, uint64_t c);

/* The areas of an end; read-only descriptions (the bytes are the user's to
 * write in outbound and read in inbound, the counts are the rail's).
 * e must not be NULL. */
RIG_API rig_area rig_end_outbound(const rig_end *e);
RIG_API rig_area rig_end_inbound(const rig_end *e);
RIG_API rig_area rig_end_counts(const rig_end *e);

/* Acquire loads of the end's counts (0 for a NULL end). */
RIG_API uint64_t rig_end_ready_count(const rig_end *e);
RIG_API uint64_t rig_end_sent(const rig_end *e);
RIG_API uint64_t rig_end_arrived(const rig_end *e);

/* Advances ready to at least c with release order and wakes the rail, which
 * then carries every transfer up to c.  Any thread, at any time until the
 * rail ends (after that it only advances the count).  It has no error path:
 * c == 0, c >= INT64_MAX or a NULL end is ignored and logged once; on a
 * failed job the count stays at RIG_COUNT_FAILED. */
RIG_API void rig_end_ready(rig_end *e, uint64_t c);

/* The end's ready function (never NULL for a valid end); NULL for NULL. */
RIG_API rig_ready_fn rig_end_ready_fn(const rig_end *e);

/* Waits until arrived (resp. sent) >= c, polling as the process's wait
 * mode says (spin, yield the core, or sleep in the kernel: rig/wait.h,
 * RIG_WAIT), so an oversubscribed node is not starved.  Returns true when
 * reached, false once the count is RIG_COUNT_FAILED (the job failed), and
 * at once for a NULL end or c >= INT64_MAX (logged once).
 * rig_end_test_arrived and rig_end_test_sent (rig/wait.h) tell these
 * apart without waiting.  Any thread. */
RIG_API bool rig_end_wait_arrived(const rig_end *e, uint64_t c);
RIG_API bool rig_end_wait_sent(const rig_end *e, uint64_t c);
/* As above with a limit: also false (and *timed_out true) after timeout_ms
 * milliseconds; timed_out may be NULL. */
RIG_API bool rig_end_wait_arrived_for(const rig_end *e, uint64_t c,
                                      uint32_t timeout_ms, bool *timed_out);
RIG_API bool rig_end_wait_sent_for(const rig_end *e, uint64_t c,
                                   uint32_t timeout_ms, bool *timed_out);

/* Whether the end's counts were raised to RIG_COUNT_FAILED. */
RIG_API bool rig_end_failed(const rig_end *e);

/* ---- providers ---------------------------------------------------------- */

/* How to write a provider, step by step (memory, wake, failure, stop,
 * lifetimes), with a worked example: rig/provider.h. */

/* What a provider gives an end.  The provider owns the areas and the
 * transport and keeps them valid until `release` runs. */
typedef struct {
    rig_area outbound; /* two copies of rig_copy_bytes(send, RIG_BY_SRC) */
    rig_area inbound;  /* two copies of rig_copy_bytes(receive, RIG_BY_DST) */
    rig_area counts;   /* >= RIG_COUNTS_BYTES, zeroed, 8-byte aligned */
    /* Wakes the rail after rig_end_ready stored ready (release): the
     * provider reads the count and carries every transfer up to it.  May be
     * called from any thread, concurrently, and with a stale c. Required. */
    void (*wake)(void *self, uint64_t c);
    /* The C ready function; NULL: rig's own (rig_ready_by_counts), which
     * finds this end through the table of live ends. */
    rig_ready_fn ready_fn;
    /* Runs exactly once, when the last reference to the end and its rail
     * goes, on the thread that dropped it.  May be NULL. */
    void (*release)(void *self);
    void *self;
    /* Optional: the receive list (copied).  A wait for `arrived` then
     * pulls the first line of the awaited transfer's landing place while
     * it polls, so that line is not a second miss after the count on a
     * peer that stores straight into this memory.  NULL and 0: no pull.
     * Each transfer must land inside one copy of the inbound. */
    const rig_transfer *receive;
    size_t nreceive;
    /* Optional: drives the transport for a thread that waits on this
     * end.  A wait or test of the end's counts (rig_end_wait_*,
     * rig_end_test_*, rig_wait_*, the run helpers) that finds a count
     * missing calls progress(progress_arg) while it spins or yields --
     * never in the block mode (rig/wait.h) -- as MPI's waits drive
     * MPI: for a transport whose counts move only when someone runs its
     * progress (a network library's completion handlers).  Called from
     * any thread, concurrently, often: it must return at once when
     * another thread is at it (take its locks with a try), must not block,
     * and must not wait on rig's counts.  progress_arg must stay valid
     * while the end does.  NULL: the counts move without the waiter. */
    void (*progress)(void *arg);
    void *progress_arg;
} rig_end_desc;

/* Sets d's outbound, inbound and counts to the areas layout l places in an
 * allocation of l->total bytes at base (an empty direction gets a NULL
 * base), leaving d's other fields alone: what every provider that uses
 * rig_end_layout_make does before rig_end_make.  NULL arguments: nothing. */
RIG_API void rig_end_desc_areas(rig_end_desc *d, const rig_end_layout *l,
                                void *base);

/* A provider's new end, holding one reference (passed on to the rail by
 * rig_rail_make, or dropped with rig_end_release).  The end is entered in
 * the table of live ends under its counts address until rig_end_stop.
 * Registers no cleanup.  False with "invalid: ..." for a NULL desc, a NULL
 * wake, a counts area smaller than RIG_COUNTS_BYTES or misaligned, an area
 * with a NULL base and a non-zero length, a receive list that is NULL with
 * transfers or lands outside one inbound copy, or a counts address already
 * live;
 * "nomem: ..." when allocation fails. */
RIG_API bool rig_end_make(const rig_end_desc *desc, rig_end **out, char **err);

/* rig's ready function: finds the live end whose counts area starts at
 * counts and does what rig_end_ready does; for an end no longer live (the
 * rail ended) it only advances ready.  Blocks only on the table's lock. */
RIG_API void rig_ready_by_counts(void *counts, uint64_t c);

/* Ends the rail at this end: it leaves the table of live ends, and ready
 * from now on only advances the count and wakes nothing.  Idempotent. */
RIG_API void rig_end_stop(rig_end *e);

/* Raises all three counts of e to RIG_COUNT_FAILED (the job failed), for
 * good.  Idempotent, any thread. */
RIG_API void rig_end_fail(rig_end *e);

/* The provider's self pointer of an end (NULL for NULL). */
RIG_API void *rig_end_provider(const rig_end *e);

/* Extra references to an end alone (a program that uses it): each
 * retain needs one release.  The pair (rail, end) is freed, and the
 * provider's release hook run, when the last reference of either goes. */
RIG_API rig_end *rig_end_retain(rig_end *e);
RIG_API void rig_end_release(rig_end *e);

/* ---- rails -------------------------------------------------------------- */

/* A provider's new rail with id and local end (NULL: none here).  The end's
 * reference passes to the rail: the caller must not release it again.  The
 * returned rail holds one reference.  False with "invalid: ..." for an id
 * < 0 or an end already in a rail; "nomem: ..." on allocation failure (the
 * end's reference is then still the caller's). */
RIG_API bool rig_rail_make(int64_t id, rig_end *local, rig_rail **out,
                           char **err);

/* The rail's id among the job's rails (-1 for NULL). */
RIG_API int64_t rig_rail_id(const rig_rail *r);
/* The end on this process's machine, or NULL; borrowed (valid while the
 * rail is). */
RIG_API rig_end *rig_rail_local(const rig_rail *r);
/* References shared with the local end; NULL is ignored. */
RIG_API rig_rail *rig_rail_retain(rig_rail *r);
RIG_API void rig_rail_release(rig_rail *r);

/* Sets a function that runs gone(arg) once, when the last reference of r
 * and its local end goes, before the provider's release hook, on the
 * thread that dropped it: how whoever handed the rail out learns that no
 * one can name it any more (the remote layer, for a rail between two
 * other machines, which has no local end and so no provider hook).  At
 * most one per rail.  The caller must hold a reference of r.  gone must
 * not call back into the rail.  Errors: "invalid:" for a NULL r or gone,
 * or a rail that has one already.  Any thread. */
RIG_API bool rig_rail_on_release(rig_rail *r, void (*gone)(void *arg),
                                 void *arg, char **err);

/* ---- proxies ------------------------------------------------------------ */

typedef struct rig_host rig_host;

/* The record of another machine's host. */
struct rig_host {
    /* The machine's name, as its devices' names end. */
    const char *machine;
    /* Makes a rail between this host's machine and peer's (NULL: this
     * process's machine) carrying send from this host's machine and receive
     * to it.  Errors: "invalid:" if peer is this host or the lists fail
     * rig_check_transfers, "failed:" if the job has failed, "foreign:" if
     * peer is of another job.  Any thread.  Call through rig_host_rail. */
    bool (*rail)(const rig_host *h, const rig_host *peer,
                 const rig_transfer *send, size_t nsend,
                 const rig_transfer *receive, size_t nreceive, rig_rail **out,
                 char **err);
    /* What the agent stated when it loaded program p: the most threads a
     * group of each launch may have, per step; -1 for "none".  Returns the
     * number of entries and sets *out (malloc'd; NULL when 0).  0 for no
     * such program.  Any thread.  Call through rig_host_threads. */
    size_t (*threads)(const rig_host *h, int64_t program, int32_t **out);
    /* The provider's implementation. */
    void *impl;
};

/* The record of another machine's device: its id on that machine. */
typedef struct {
    int64_t id;
} rig_device;

typedef enum { RIG_PROXY_HOST = 1, RIG_PROXY_DEVICE = 2 } rig_proxy_kind;

/* The record a proxy declares. */
typedef struct {
    rig_proxy_kind kind;
    union {
        rig_host host;
        rig_device device;
    } u;
} rig_proxy;

/* Checked calls of a host's functions: "invalid:" for a NULL host, out or
 * a host without the function, peer == h, or bad lists (checked before the
 * host sees them). */
RIG_API bool rig_host_rail(const rig_host *h, const rig_host *peer,
                           const rig_transfer *send, size_t nsend,
                           const rig_transfer *receive, size_t nreceive,
                           rig_rail **out, char **err);
RIG_API size_t rig_host_threads(const rig_host *h, int64_t program,
                                int32_t **out);

/* A capability: a value under a key, as a device's facts carry it. */
typedef struct {
    const void *key;
    const void *value;
} rig_capability;

/* The key proxy records are declared under (its address is the key). */
RIG_API extern const char rig_remote_abi_key[];

/* The capability that carries record p under rig_remote_abi_key. */
RIG_API rig_capability rig_remote_abi_declare(const rig_proxy *p);

/* The value under key among facts[0..n), or NULL. */
RIG_API const void *rig_capability_find(const rig_capability *facts, size_t n,
                                        const void *key);
/* The proxy record among a device's facts, or NULL if it is not a proxy. */
RIG_API const rig_proxy *rig_remote_abi_find(const rig_capability *facts,
                                             size_t n);

/* ---- the loopback provider ---------------------------------------------- */

/* Two ends of one rail in this process, the bytes moved by ready itself on
 * the calling thread: the reference example of a provider, and a way to
 * test rail code without MPI.  *a sends send and receives receive; *b the
 * opposite.  Both rails have the given id.  Errors: the
 * rig_check_transfers message, "invalid:" for NULL outputs or id < 0,
 * "nomem:". */
RIG_API bool rig_loopback_make(int64_t id, const rig_transfer *send,
                               size_t nsend, const rig_transfer *receive,
                               size_t nreceive, rig_rail **a, rig_rail **b,
                               char **err);

/* ---- library ------------------------------------------------------------ */

/* rig's version, "0.1.0". */
RIG_API const char *rig_version(void);

#ifdef __cplusplus
}
#endif

/* Tests, waits over several ends, the wait mode and the run helpers. */
#include <rig/wait.h>

#endif
