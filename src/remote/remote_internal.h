/* SPDX-License-Identifier: BSD-3-Clause */
/* The remote layer's private state, wire formats and shared helpers.
 *
 * Messages on the layer's own communicator (a duplicate of the job's):
 *   RM_TAG_CMD    controller -> agent: a command (rm_cmd + its body)
 *   RM_TAG_REPLY  agent -> controller: the command's outcome (rm_reply +
 *                 threads + message)
 *   RM_TAG_EVENT  agent -> controller: a crash report, unasked
 *   RM_TAG_OVER   agent -> controller: a launch ended (rm_over), unasked:
 *                 what rig_remote_wait waits for instead of asking
 *   RM_TAG_IMAGE  controller -> agent: image chunks of a load onto a
 *                 subset of the agents (a load onto every agent uses
 *                 MPI_Ibcast on the communicator instead)
 * Every message is sent with MPI_Isend and taken with MPI_Improbe and
 * MPI_Mrecv, every wait tested in a loop that watches the job, so that no
 * rank blocks on a dead one.  The controller talks to the agents one call
 * at a time (rm->lock), so an agent has at most one command and the
 * controller at most one reply per agent outstanding; a reply carries its
 * command's sequence number all the same.
 *
 * Lock order: rm->lock (the controller's conversation), then a rail
 * link's lock (rm_link), then rm->table_lock (threads tables, program
 * list, events, rails). */
#ifndef RIG_REMOTE_INTERNAL_H
#define RIG_REMOTE_INTERNAL_H

#include "rig/remote.h"

#include "mesh/driver.h"
#include "mesh/ends.h"
#include "mesh/executors.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RM_MAGIC 0x726d7431u /* "rmt1" */

enum {
    RM_TAG_CMD = 11,
    RM_TAG_REPLY = 12,
    RM_TAG_EVENT = 13,
    RM_TAG_IMAGE = 14,
    RM_TAG_OVER = 15
};

enum {
    RM_OP_LOAD = 1,
    RM_OP_LAUNCH = 2,
    RM_OP_QUERY = 3,
    RM_OP_HALT = 4,
    RM_OP_UNLOAD = 5,
    RM_OP_CLOSE = 6,
    RM_OP_HELD = 7,
    RM_OP_RAIL = 8, /* make an end: rm_rail_cmd + lists; reply rm_wire_end */
    RM_OP_DROP = 9, /* the controller released rails: u32 n, n i64 ids */
    RM_OP_ENDS = 10 /* the rails whose ends the agent holds: i64 ids */
};

/* The most transfers each way of a rail the controller makes (RAIL's
 * lists travel in one message). */
#define RM_RAIL_TRANSFERS_MAX (1u << 24)

/* RAIL's body after the command: the peer (a job rank), then nsend and
 * nreceive transfers, this agent's send list first. */
typedef struct {
    int32_t peer;
    uint32_t pad;
    uint64_t nsend, nreceive;
} rm_rail_cmd;

/* An end as the wire carries it: its rail's id and where it sits
 * (mesh_end_place; shm -1: in no segment, or not to be mapped). */
typedef struct {
    int64_t id;
    int32_t shm;
    uint32_t pad;
    uint64_t bytes, counts_at, outbound_at, inbound_at;
} rm_wire_end;

/* One binding of a load (after the file list): the machine, the input,
 * the rail, and the peer end when the program may map it. */
typedef struct {
    int32_t rank;
    uint32_t input;
    rm_wire_end peer;
} rm_wire_bind;

/* LOAD: how the image comes after the command.  An image of at most
 * RM_SMALL_IMAGE bytes goes by a send to each agent even when every agent
 * loads it: each send is one transfer straight into the memory the agent
 * keeps it in, and is under way while the agent takes the command, where
 * MPI_Ibcast's tree relays the bytes through other agents.  (In the
 * command itself, as before, the controller copied the image into the
 * command and each agent copied it out again: a quarter of a small
 * load's time that was not the prepare.) */
enum { RM_IMAGE_BCAST = 1, RM_IMAGE_P2P = 2 };
#define RM_SMALL_IMAGE (64u * 1024u)
/* The longest file path of an image. */
#define RM_PATH_MAX 4096u

/* A command.  LOAD's body: the program's name, the file count, then each
 * file's path and length, the bindings (u32 n, n rm_wire_bind), the
 * executor each machine picks (u32 size, then one u32 per job rank,
 * RM_NO_PICK for a machine the load is not for); the files' bytes follow
 * as the image. */
#define RM_NO_PICK UINT32_MAX
typedef struct {
    uint32_t magic;
    uint32_t op;
    uint64_t seq;
    int64_t program;
    uint64_t hash;
    uint64_t chunk; /* LOAD: the most bytes of one MPI call */
    uint32_t nodes; /* LAUNCH: nodes (0: the manifest's) */
    uint32_t image; /* LOAD: RM_IMAGE_* */
} rm_cmd;

/* A reply; then nthreads int32 entries, then msg_len bytes of message (a
 * refusal, or a crash report) without its NUL; HELD's message is the
 * program ids, int64 each. */
typedef struct {
    uint32_t magic;
    uint32_t op;
    uint64_t seq;
    int32_t ok;
    uint32_t state; /* rig_remote_run */
    uint32_t exec;
    uint32_t nodes;
    uint64_t points[MESH_POINTS];
    uint64_t launch;     /* LAUNCH, QUERY: the launch's number (1, ...) */
    uint64_t receive_ns; /* LOAD: command to last image byte */
    uint64_t prepare_ns; /* LOAD: the prepare */
    uint32_t nthreads;
    uint32_t msg_len;
} rm_reply;

/* A crash report of a launch of a program: then msg_len bytes. */
typedef struct {
    uint32_t magic;
    uint32_t msg_len;
    int64_t program;
    uint64_t launch;
} rm_event;

/* The end of a launch of a program, as its agent saw it (state
 * RIG_REMOTE_DONE or RIG_REMOTE_CRASHED): sent once per launch, whoever
 * waits for it. */
typedef struct {
    uint32_t magic;
    uint32_t state;
    int64_t program;
    uint64_t launch;
} rm_over;

/* ---- growable buffers and readers --------------------------------------- */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    bool oom;
} rm_buf;

void rm_buf_put(rm_buf *b, const void *data, size_t len);
void rm_buf_u32(rm_buf *b, uint32_t v);
void rm_buf_u64(rm_buf *b, uint64_t v);
void rm_buf_str(rm_buf *b, const char *s); /* u32 length, bytes, no NUL */
void rm_buf_free(rm_buf *b);

typedef struct {
    const uint8_t *p;
    size_t len, at;
    bool bad;
} rm_rd;

bool rm_rd_get(rm_rd *r, void *out, size_t len);
uint32_t rm_rd_u32(rm_rd *r);
uint64_t rm_rd_u64(rm_rd *r);
/* A malloc'd NUL-terminated copy (NULL and r->bad on a short or
 * oversized string: at most max bytes). */
char *rm_rd_str(rm_rd *r, size_t max);

/* ---- the controller's programs ------------------------------------------ */

/* Program p on one machine, as the controller knows it. */
typedef struct {
    int rank;
    uint32_t exec;
    bool launched;
    uint32_t nodes;
    uint64_t launch; /* the current launch's number, as the agent counts */
    char *crash;     /* the first crash report of the current launch */
    /* The last launch the agent said ended (0: none yet), and how. */
    uint64_t over;
    uint32_t over_state;
} rm_place;

typedef struct rm_program {
    int64_t id;
    char *name;
    uint64_t hash;
    rm_place *places; /* in rank order */
    size_t nplaces;
    struct rm_program *next;
} rm_program;

/* ---- the controller's rails (rails.c) ----------------------------------- */

/* What a rail's release function holds: the layer, while it is open.  Two
 * references, the function's and the layer's; the last frees it. */
typedef struct rm_link {
    pthread_mutex_t lock;
    rig_remote *rm; /* NULL once the layer closed */
    int64_t id;
    atomic_int refs;
} rm_link;

/* A rail the controller made: between machines a and b (b 0: the
 * controller's), the lists as a sends and receives, and where each end
 * sits (mesh_end_place: index 0 for a, 1 for b). */
typedef struct rm_rail {
    int64_t id;
    int a, b;
    rig_transfer *send, *receive;
    size_t nsend, nreceive;
    mesh_end_place place[2];
    bool released; /* the controller's rail went: agents drop their ends */
    rm_link *link;
    struct rm_rail *next;
} rm_rail;

/* ---- an agent's programs ------------------------------------------------ */

/* A staging line: memory (malloc'd) an image's file of at least
 * RM_LINE_MIN bytes is received into, cap bytes long.  The program that
 * loaded it holds it in its payload; at unload it goes to the agent's
 * pool (rig_remote.pool) for the next load, so that a later image lands
 * in memory whose pages are in place, as a bare MPI_Bcast's reused
 * buffer's are (agent.c). */
typedef struct {
    uint8_t *p;
    size_t cap;
} rm_line;
#define RM_LINE_MIN (1u << 20)

typedef struct agent_prog {
    int64_t id;
    char *name;
    uint64_t hash;
    uint32_t exec;
    /* What the load prepared, until a launch takes it. */
    mesh_prepared prepared;
    bool has_prepared;
    /* The payload, kept once a launch took the prepared image, to prepare
     * it again for the next launch. */
    mesh_payload kept;
    bool has_kept;
    bool launched;
    uint32_t slot;
    uint32_t nodes;
    uint64_t launches; /* launches so far: a crash report names its own */
    rig_remote_run state;
    uint64_t points[MESH_POINTS]; /* of the last launch, read at its end */
    char *crash;                  /* the report of this launch's crash */
    bool crash_sent;
    int32_t threads;
    /* The staging lines its payload's files sit in (nlines of them). */
    rm_line *lines;
    size_t nlines;
    /* Its inputs' ends (a reference on each from load to unload) and the
     * view of them prepared images get. */
    mesh_end_binding *binds;
    size_t nbinds;
    mesh_ends ends;
    struct agent_prog *next;
} agent_prog;

/* An end this agent made for the controller. */
typedef struct agent_rail {
    int64_t id;
    int peer;
    rig_rail *rail; /* the table's reference; NULL once dropped */
    rig_end *end;   /* borrowed: valid while alive */
    rig_transfer *send, *receive;
    size_t nsend, nreceive;
    int64_t writer; /* the loaded program that writes it; 0: none */
    bool alive;     /* the pair lives (its release function clears it) */
    struct agent_rail *next;
} agent_rail;

/* ---- records ------------------------------------------------------------ */

/* Program threads as an agent stated them, per machine. */
typedef struct rm_threads {
    int64_t program;
    size_t n;
    int32_t *threads;
    struct rm_threads *next;
} rm_threads;

typedef struct {
    rig_host host; /* what the Host proxy's record copies */
    rig_remote *rm;
    int rank;
    rm_threads *threads; /* under rm->table_lock */
} rm_hostrec;

/* ---- the layer ---------------------------------------------------------- */

struct rig_remote {
    rig_job *job;
    MPI_Comm comm;
    int rank, size;
    pthread_mutex_t lock;       /* the controller's conversation */
    pthread_mutex_t table_lock; /* threads tables, programs, events */

    /* The table, the same on every rank; index by rank (0 unused). */
    rig_remote_machine *machines; /* strings owned (rm_table_free) */
    rm_hostrec *hosts;
    rig_remote_proxy *proxies;
    size_t nproxies;

    /* Settings. */
    uint64_t chunk;
    bool corrupt; /* RIG_REMOTE_TEST_CORRUPT names this rank */

    /* The controller. */
    int64_t last_program;
    /* The last manifest a load parsed: its bytes and what they say
     * (controller.c, manifest_of; under lock). */
    char *manifest_json;
    size_t manifest_len;
    mesh_manifest manifest;
    uint64_t seq;
    rm_program *programs;
    char **events;
    size_t nevents, events_cap;
    rm_rail *rails;   /* under table_lock */
    size_t nreleased; /* rails released, not yet dropped; table_lock */

    /* An agent. */
    mesh_backend *backends[MESH_BACKEND_COUNT];
    mesh_driver *drivers[MESH_BACKEND_COUNT];
    agent_prog *progs;
    agent_rail *arails;
    bool served;
    /* Staging lines of unloaded images, for the next loads: at most
     * keep bytes in all (RIG_REMOTE_KEEP_BYTES), freed at close. */
    uint64_t keep;
    rm_line *pool;
    size_t npool, pool_cap;
    uint64_t pool_bytes;
    MPI_Request *pending; /* crash reports on their way */
    void **pending_buf;
    size_t npending, pending_cap;

    /* The watch on MPI itself (wait.c, "MPI that does not return"): this
     * layer's MPI calls entered and left, counted together (odd while one
     * is in progress), the last one's name, and the thread that ends the
     * process once one call has not returned in stuck_ns
     * (RIG_REMOTE_STUCK_MS; 0: no thread). */
    _Atomic uint64_t mpi_steps;
    _Atomic(const char *) mpi_call;
    uint64_t stuck_ns;
    pthread_t stuck_thread;
    bool stuck_started, stuck_stop; /* stuck_stop under stuck_lock */
    pthread_mutex_t stuck_lock;
    pthread_cond_t stuck_cond;
};

/* ---- waits (wait.c) ----------------------------------------------------- */

/* A wait's pace (see wait.c): RM_PACE_DATA tests as fast as blocking MPI
 * would (an image on its way); RM_PACE_IDLE (an agent waiting for a
 * command), RM_PACE_MEET (a rank waiting in the open for the others to
 * reach it) and RM_PACE_REPLY (the controller waiting for replies) are
 * hot for a short while, yielding the core between tests, then back off
 * to sleeps; RM_PACE_RUN (an agent waiting while its programs run) is hot
 * as RM_PACE_IDLE, then sleeps 1 ms, 2, 4, then 8 ms at a time. */
typedef enum {
    RM_PACE_DATA,
    RM_PACE_IDLE,
    RM_PACE_MEET,
    RM_PACE_REPLY,
    RM_PACE_RUN
} rm_pace;

typedef struct {
    uint32_t spins;
    uint32_t naps;
    uint64_t idle_since;
} rm_backoff;

/* One step of a wait that found nothing; rm_backoff_reset after news
 * (a command served, a reply taken) makes the next steps hot again. */
void rm_backoff_step(rm_backoff *b, rm_pace pace);
void rm_backoff_reset(rm_backoff *b);

/* RM_MPI(rm, "MPI_Isend", MPI_Isend(...)): the MPI call, its return
 * code, with rm's watch on MPI told that it is in progress (every MPI
 * call of this layer after open goes through it: wait.c says why). */
#define RM_MPI(rm, name, call)                                                 \
    (rm_mpi_enter((rm), (name)), rm_mpi_left((rm), (call)))

static inline void rm_mpi_enter(rig_remote *rm, const char *name)
{
    atomic_store_explicit(&rm->mpi_call, name, memory_order_relaxed);
    atomic_fetch_add_explicit(&rm->mpi_steps, 1, memory_order_release);
}

static inline int rm_mpi_left(rig_remote *rm, int rc)
{
    atomic_fetch_add_explicit(&rm->mpi_steps, 1, memory_order_release);
    return rc;
}

/* The watch on MPI: started by rig_remote_open (RIG_REMOTE_STUCK_MS read
 * into rm->stuck_ns first), stopped by rm_stuck_stop, before rm goes. */
void rm_stuck_start(rig_remote *rm);
void rm_stuck_stop(rig_remote *rm);

/* "failed: <what>: <the job's reason>" into *err; false. */
bool rm_failed(const rig_remote *rm, char **err, const char *what);

/* Tests reqs[0..n) until all complete.  When the job fails first, the
 * requests are left to MPI and bufs[0..nbufs) are handed to
 * rm_abandon: false with rm_failed(what).  On the controller, crash
 * reports that arrive meanwhile are taken in.  An MPI error is
 * "system: ". */
bool rm_wait_all(rig_remote *rm, MPI_Request *reqs, int n, rm_pace pace,
                 void **bufs, size_t nbufs, const char *what, char **err);

/* Memory an unfinished MPI request may still write: never freed, kept
 * reachable (see wait.c). */
void rm_abandon(void *buf);

/* Translates an MPI error code: "system: <call> failed: <MPI's text>". */
bool rm_mpi_err(char **err, int rc, const char *call);

/* ---- machines and records (machine.c, records.c) ------------------------ */

/* Appends this rank's description (an agent's F_JOIN) to *out: on an
 * agent it opens the executors of mask executors (keeping them and their
 * drivers in rm), each left out described as "unsupported: left out by
 * <by>"; the controller opens none. */
bool rm_describe(rig_remote *rm, uint32_t executors, const char *by,
                 rm_buf *out, char **err);

/* Parses the table (every rank's description, in rank order) into
 * rm->machines.  False with "invalid: " for a malformed table. */
bool rm_table_parse(rig_remote *rm, const uint8_t *table, size_t len,
                    char **err);
void rm_table_free(rig_remote *rm);

/* Makes the host records and proxies from rm->machines. */
bool rm_records_make(rig_remote *rm, char **err);
void rm_records_free(rig_remote *rm);

/* Sets (n > 0) or removes (n == 0) what machine rank stated for program. */
bool rm_threads_set(rig_remote *rm, int rank, int64_t program,
                    const int32_t *threads, size_t n);

/* Display names of the executors a machine runs: "native, wasm" (or
 * "nothing"), malloc'd. */
char *rm_runs_list(const rig_remote_machine *m);

/* ---- the controller (controller.c) -------------------------------------- */

/* One agent's reply, parsed. */
typedef struct {
    int rank;
    rm_reply h;
    int32_t *threads;
    char *msg;    /* the message as text */
    uint8_t *raw; /* and as bytes (h.msg_len) */
} rm_got;

void rm_got_free(rm_got *g, size_t n);
/* A new command (the next sequence number); rm->lock held. */
rm_cmd rm_cmd_new(rig_remote *rm, uint32_t op, int64_t program);
/* Takes each of ranks[0..n)'s reply to command seq into out[i]. */
bool rm_replies(rig_remote *rm, const int *ranks, size_t n, uint64_t seq,
                rm_got *out, const char *what, char **err);
/* Sends command msg to ranks[0..n) and takes their replies into *out
 * (malloc'd, n entries).  msg is freed.  rm->lock held. */
bool rm_round_trip(rig_remote *rm, const int *ranks, size_t n, rm_buf *msg,
                   rm_got **out, const char *what, char **err);
/* "<reason>: machine vm:2: <rest>" for each refusal among g[0..n), joined
 * by "; "; false. */
bool rm_refusals(const rig_remote *rm, const rm_got *g, size_t n,
                 const char *fallback, char **err);

/* Takes in every crash report and end of a launch (rm_over) that has
 * arrived (no waiting).  Caller holds rm->lock (its MPI calls are the
 * conversation's); table_lock is taken for the records. */
void rm_events_drain(rig_remote *rm);

/* Tells every agent to close and waits for all of them.  rm->lock held. */
void rm_controller_close(rig_remote *rm);

void rm_programs_free(rig_remote *rm);

/* ---- rails (rails.c) ---------------------------------------------------- */

/* The controller's host->rail once the record's checks passed: makes the
 * rail between agent a and b (0: the controller's machine). */
bool rm_rail_make(rig_remote *rm, int a, int b, const rig_transfer *send,
                  size_t nsend, const rig_transfer *receive, size_t nreceive,
                  rig_rail **out, char **err);

/* Takes rm->lock, takes in the agents' unasked messages
 * (rm_events_drain) and tells the agents of the rails released since the
 * last call to drop their ends (a failed job: neither).  Every call of
 * the controller that talks to agents starts with it. */
void rm_lock(rig_remote *rm);

/* The controller's rail id (not released) or NULL; table_lock held. */
rm_rail *rm_rail_find(rig_remote *rm, int64_t id);

/* Forgets every rail record (the layer closes): release functions that
 * run later find the layer gone. */
void rm_rails_free(rig_remote *rm);

/* An agent's commands. */
bool rm_agent_rail(rig_remote *rm, const rm_cmd *c, rm_rd *body, char **err);
bool rm_agent_drop(rig_remote *rm, const rm_cmd *c, rm_rd *body, char **err);
bool rm_agent_ends(rig_remote *rm, const rm_cmd *c, char **err);

/* The agent's record of rail id that is alive, or NULL. */
agent_rail *rm_agent_rail_find(rig_remote *rm, int64_t id);

/* Drops the table's reference of every end and forgets the records that
 * died (the agent closes, or the job failed; programs unloaded first). */
void rm_agent_rails_free(rig_remote *rm);

/* Forgets the records of ends whose pair is gone. */
void rm_agent_rails_sweep(rig_remote *rm);

/* Sends a reply whose message is len raw bytes (agent.c). */
bool rm_agent_send_raw(rig_remote *rm, rm_reply *h, const void *data,
                       size_t len, char **err);
/* Refuses command c with why (agent.c). */
bool rm_agent_refuse(rig_remote *rm, const rm_cmd *c, const char *why,
                     char **err);

/* ---- an agent (agent.c) ------------------------------------------------- */

/* Unloads every program of this agent (a close, a failed job). */
void rm_agent_unload_all(rig_remote *rm);

/* Closes the drivers and destroys the backends. */
void rm_agent_free(rig_remote *rm);

#endif
