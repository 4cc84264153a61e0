/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/abi/backend.h: backend kinds and words, load reasons, isolation words.
 *
 * These are the numbers that cross process and machine boundaries: they sit
 * in the mailbox header (S_BACKEND, S_ISOLATION), in a machine's description
 * gathered at job open (F_JOIN) and in the first word of every load refusal.
 * Changing a value breaks every peer and every built program: append only.
 *
 * - A backend *kind* (MESH_BACKEND_*) names an executor.  Kinds index the
 *   backend table (mesh/executors.h) and the name table MESH_BACKEND_NAMES.
 *   Metal keeps its number although it is not ported, so that words stay
 *   those of the original and a Metal peer is labelled, not misread.
 * - A backend *word* packs a kind with its device family (Metal's
 *   MTLGPUFamilyAppleN; 0 elsewhere): kind in bits 0..7, family in 8..31.
 * - LOAD_REASONS are the words a load refusal starts with ("manifest: ...").
 *   Everything that turns a program down -- the manifest parser, the checks
 *   every backend makes, a compiler, a backend's load -- starts its message
 *   with one of them, so the controller can tally refusals by reason.
 * - Isolation words (S_ISOLATION) say what a module change disturbs.
 *
 * Header only; no function here needs librig. */
#ifndef MESH_ABI_BACKEND_H
#define MESH_ABI_BACKEND_H

#include <stdint.h>

/* ---- backend kinds (BACKEND_* in the spec) ---------------------------- */

#define MESH_BACKEND_CUDA 0u   /* CUDA Driver API, PTX via nvJitLink */
#define MESH_BACKEND_METAL 1u  /* reserved: Metal is not ported */
#define MESH_BACKEND_WASM 2u   /* wasm2c modules on lease lanes */
#define MESH_BACKEND_NATIVE 3u /* executables as worker processes */
/* Number of kinds; kinds are < MESH_BACKEND_COUNT. */
#define MESH_BACKEND_COUNT 4u

/* The names of the kinds, indexed by kind (BACKENDS[] in the spec).  They
 * are also the words a manifest's "backends" array uses. */
#define MESH_BACKEND_NAMES                                                     \
    {                                                                          \
        "cuda", "metal", "wasm", "native"                                      \
    }

/* ---- backend words ---------------------------------------------------- */

/* backend_word(kind, family): kind in bits 0..7, family in bits 8..31. */
#define MESH_BACKEND_WORD(kind, family)                                        \
    ((uint32_t)(((uint32_t)(family) << 8) | ((uint32_t)(kind)&0xffu)))
#define MESH_BACKEND_WORD_KIND(word) ((uint32_t)(word)&0xffu)
#define MESH_BACKEND_WORD_FAMILY(word) ((uint32_t)(word) >> 8)

/* ---- load reasons (LOAD_REASONS in the spec) -------------------------- */

/* Each is the first word of a refusal, followed by ": " and the story.
 *   manifest     the manifest is missing, not JSON, or breaks a rule
 *   abi          built for another runtime ABI (manifest "abi" or
 *                MESH_RT_ABI of the image)
 *   unsupported  this backend cannot run it: the program does not list it,
 *                the backend is compiled out, or there is no hardware
 *   missing      the catalog lacks a file the backend needs (the binary
 *                for this target, the PTX, the module)
 *   hash         the payload's hash is not the expected one (F_LOAD)
 *   compile      the image does not compile or is not an executable image
 *   limits       the program asks for more than the executor has (threads,
 *                nodes, scratch, shared memory)
 *   load         the executor failed to load or start the image
 * X-macro list: X(word) for each, in this order. */
#define MESH_LOAD_REASONS(X)                                                   \
    X(manifest)                                                                \
    X(abi)                                                                     \
    X(unsupported)                                                             \
    X(missing)                                                                 \
    X(hash)                                                                    \
    X(compile)                                                                 \
    X(limits)                                                                  \
    X(load)

/* Number of load reasons. */
#define MESH_LOAD_REASON_COUNT 8u

/* ---- isolation words (S_ISOLATION) ------------------------------------ */

/* One context: a module change halts every program (CUDA blink). */
#define MESH_ISOLATION_BLINK 0u
/* MPS workers: a module change halts only its slot. */
#define MESH_ISOLATION_MPS 1u
/* One process per program (native): a change touches only its slot. */
#define MESH_ISOLATION_PROCESS 2u
/* Lease lanes (wasm): a change touches only its slot's lanes. */
#define MESH_ISOLATION_LANES 3u

#endif
