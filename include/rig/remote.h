/* SPDX-License-Identifier: BSD-3-Clause */
/* rig/remote.h: rank 0 as the controller of a job's machines.
 *
 * Concepts.
 *
 * The *remote layer* sits on a job (rig/job.h).  Rank 0 of the job is the
 * *controller*; every other rank is the *agent* of its *machine*, named
 * "<hostname>:<rank>" as the job names it (rig_job_host).  An agent opens
 * the executors of its machine (mesh/executors.h) and serves the
 * controller: it loads, launches, queries, halts and unloads programs when
 * the controller says so, and has nothing else to do (rig_remote_serve, or
 * the installed `rig_agent` program in an MPMD launch:
 * `mpirun -np 1 ./controller : -np 3 rig_agent`).
 *
 * Proxies (spec 000, "Proxies").  A proxy is a device of the controller's
 * process that stands for a device an agent opened on its machine.  At
 * open every agent describes its machine -- host name, NUMA nodes, cores,
 * and each executor with its caps or the reason it does not run there
 * (the spec's F_JOIN) -- the controller gathers the descriptions and
 * broadcasts the table, and every rank makes the same records from it:
 * for each agent machine one Host record (rig_host of rig/remote_abi.h)
 * and one Device record per device there (each CUDA GPU the agent opened,
 * its id the device ordinal on that machine).  A host proxy is named like
 * its machine ("vm:2"); a device proxy's name ends with it ("cuda0@vm:2").
 * Each record is declared under rig_remote_abi_key (rig_remote_abi_declare)
 * and found with rig_remote_abi_find among its proxy's facts.
 *
 * Programs.  The controller loads a program of a catalog (the manifest and
 * payload format of mesh/loader.h) onto a set of agent machines: it reads
 * and hashes the payload once, sends it only to those agents -- with
 * MPI_Ibcast when every agent (two or more) loads it, with point-to-point
 * sends from rank 0 otherwise (MPI 3 has no way to make a communicator of
 * a subset that a member's death cannot block), file by file in chunks of
 * at most
 * RIG_REMOTE_CHUNK_BYTES; an image of at most 64 KiB goes by a send to
 * each agent even when every agent loads it, straight into the memory the
 * agent keeps it in, so that a small program loads in one round trip --
 * and each agent prepares it with the controller's
 * hash as the expected one (a changed byte is refused with "hash: "),
 * picks the first executor of the manifest's `backends` it runs and
 * compiles the image there (the spec's F_LOAD).  A load is all or
 * nothing: if one machine refuses, every machine that loaded unloads
 * again and the call fails naming every machine that refused and why.
 * The controller then launches, queries, halts and unloads the program on
 * those machines.  A program id is the controller's (1, 2, ...), never
 * reused; host->threads(program) answers what each agent stated at load.
 *
 * Rails between machines (spec 000, "Rails", "Proxies").  A machine's
 * Host record makes rails: on the controller, host->rail(peer) (or
 * rig_host_rail) makes a rail between the host's machine and peer's --
 * two agents -- or, for peer NULL, the controller's own machine; no code
 * of the user's runs on the agents.  The controller tells both agents (in
 * one round, under its lock, so that two makes for one pair never
 * interleave: the job's pair protocol matches a pair's makes in order),
 * each makes its end with the job's ordinary rail making (rig_job_rail,
 * which the controller joins itself for peer NULL), and bytes then flow
 * between the two machines' ends, never through rank 0.  The rail's id
 * is the one the job gives the k-th rail of that pair (rig_job_rail's),
 * the same on both machines and unique in the job: the controller picks
 * the order, hence the id, and hands out a rail with that id -- with its
 * local end for peer NULL, with none between two agents.  Programs find
 * their ends by it.
 *
 * Programs and ends.  A load may bind the program's inputs (mesh/abi/
 * ends.h: the numbered rail ends its manifest's "reads" and "writes"
 * name) to ends of such rails, machine by machine
 * (rig_remote_load_ends): on each machine the program then finds the end
 * of input i -- or of rail id -- and drives it itself, with no controller
 * involvement: a native program's nodes map the end (mesh/worker.h), a
 * wasm module reaches it through the mesh.end_* imports (mesh/wasm.h), a
 * CUDA kernel writes through its device address and raises a point that
 * host code turns into ready.  Lifetimes: the agent holds its end of
 * every rail the controller made until the controller's rail is released
 * (the agent learns it at the controller's next call, or at close); a
 * program loaded there holds a reference on every end it names from its
 * load to its unload, so releasing the rail on the controller while the
 * program runs frees nothing under it, and the end goes with the later of
 * the two (rig_remote_ends_held tells which ends an agent still holds).
 * An end is written (readied) by at most one loaded program at a time.
 * Failures: a failed job raises the counts of every end, the programs'
 * included, as always; a program that crashes while it holds ends
 * fails the job, with the crash report as its reason ("node 0 of program
 * p on vm:1 killed by signal 11, holding rail 42"), since a rail's
 * counts fail only with its job (seed 000) -- so no wait of a peer, on
 * any machine, is left hanging.
 *
 * Loaded, launched, halted.  An agent's load prepares the image (the
 * executor's compiler on its JIT thread: the manifest, hash, ABI and
 * binary checks, the wasm2c or nvJitLink compile) and keeps it; a launch
 * loads it into a slot of the executor and starts its nodes, returning
 * once every node on every machine is online; a halt stops the launch and
 * frees the slot, leaving the program loaded, so that it may be launched
 * again (a second launch prepares again from the kept payload: the wasm
 * module comes from the compile cache, CUDA compiles again); unload halts
 * and forgets it.
 *
 * Failure.  Every wait of this layer -- for a message, a broadcast, a
 * reply -- is a non-blocking MPI call tested in a loop that also watches
 * the job (rig_job_failed), because Open MPI 4.1's collectives block for
 * good on a dead member.  An agent's death fails the job (the job layer
 * sees it within its detection time: at once on the same node, within
 * RIG_KEEPALIVE_MS elsewhere), and every pending call of this layer on
 * every rank then returns "failed: " with the job's reason within 2 s.  A
 * program that crashes on an agent (a native node killed by a signal, a
 * wasm trap, a CUDA fault) and holds no rail end does not fail the job: the
 * agent reports it once, naming the node, program, machine and reason ("node 2
 * of program p on vm:3 killed by signal 11"), the controller logs it, keeps it
 * in the program's status and hands it out once through rig_remote_event, and
 * rig_remote_wait returns "failed: " with it.  After a job failure,
 * memory that an unfinished MPI request may still write is never freed:
 * the process must end without MPI_Finalize (Open MPI 4.1's waits for the
 * dead rank), e.g. with _exit once rig_remote_close and rig_job_close
 * returned.  A call that MPI itself never returns from no wait can
 * leave: across machines over Open MPI 4.1's TCP BTL (mpirun
 * --enable-recovery, so that the survivors live on), an agent killed
 * while an image moved to it deadlocked the controller's thread inside
 * MPI_Testall (the BTL's failed send closes the endpoint, whose error
 * path sends again and takes the send lock the failed send still holds;
 * 8 loads of 14 across 3 simulated hosts).  Rather than wait for the batch
 * system's time limit, a thread of this layer watches its MPI calls: one
 * still in progress after RIG_REMOTE_STUCK_MS (10 s) ends the process
 * with status 70, after a line that names the rank and the call.
 * (Without --enable-recovery, mpirun ends the whole job at the death.)
 *
 * Memory an agent keeps.  An agent receives each file of an image of at
 * least 1 MiB into a staging line of its own that the loaded program then
 * holds (its payload, kept for later launches); when the program is
 * unloaded the line is not freed but kept for the next load, so that a
 * later image lands in memory whose pages are in place -- as a bare
 * MPI_Bcast into a reused buffer does -- instead of fresh pages the
 * kernel must fault in and zero, which costs more than the copy.  An
 * agent keeps at most RIG_REMOTE_KEEP_BYTES of such lines (256 MiB by
 * default; the oldest go first, a line longer than that is never kept),
 * and frees them all at rig_remote_close, or when the job fails.
 *
 * Waiting.  An agent with nothing to do waits for the controller's next
 * command: for 2 ms after a command it tests for the next one, yielding
 * its core between tests (so a burst of commands is served at once), then
 * sleeps in growing naps of up to 100 us, and of 1 ms after 50 ms more of
 * quiet -- or, while one of its programs runs, which has the cores, in
 * naps of 1, 2 and 4 ms, then 8 ms; the end of a launch makes it hot
 * again: an idle agent does not hold a core.  The controller waiting for
 * its agents' replies tests, yielding, for 100 us of the wait, then
 * sleeps a sixteenth of the time it has waited (20 to 100 us; 1 ms after
 * 50 ms more), so that it does not spin beside agents that start
 * programs on the same machine; so does its wait for the sends of an
 * image of at most 64 KiB (each agent takes its bytes in turn); a wait
 * for a larger image's bytes never sleeps (MPI moves them only while its
 * ranks test).  A rank that
 * reaches rig_remote_open before the others waits for them as an idle
 * agent does (2 ms of tests, then naps): ranks that open together meet
 * at once, and a late rank -- a controller that reads its input first --
 * does not find the others each holding a core.
 *
 * Threads and MPI.  rig_remote_open and rig_remote_close are collective
 * over the job's ranks.  The controller's calls may come from any thread:
 * they take the layer's lock for their messages, so that only one of them
 * talks to the agents at a time (from several threads MPI must provide
 * MPI_THREAD_SERIALIZED; if other threads of the process call MPI
 * meanwhile, rig_job_rail included, MPI_THREAD_MULTIPLE).  The records
 * and rig_remote_machine may be read from any thread; a host's threads()
 * takes a short lock of its own.  The controller must close the layer
 * before the job: rig_job_close waits for every rank, and an agent serves
 * until the controller's rig_remote_close.
 *
 * Settings (environment; each wins over the option beside it):
 *   RIG_REMOTE_EXECUTORS    the executors an agent offers, a comma list of
 *                           "native", "wasm", "cuda" (default: every one
 *                           that opens); rig_remote_options.executors
 *   RIG_REMOTE_CHUNK_BYTES  the most bytes of an image in one MPI call
 *                           (1073741824; at least 4096): images past 2 GiB
 *                           are sent in several
 *   RIG_REMOTE_KEEP_BYTES   the most bytes of staging memory an agent
 *                           keeps for later loads (268435456; 0: none; see
 *                           Memory below)
 *   RIG_REMOTE_STUCK_MS     when one MPI call of this layer has not
 *                           returned in this many ms, the process says so
 *                           and ends with status 70 (10000; at most
 *                           86400000; 0: never; see Failure below)
 *   RIG_REMOTE_TEST_CORRUPT for tests only: a comma list of agent ranks
 *                           that change one byte of every image they
 *                           receive before preparing it, so that their
 *                           hash check refuses it (default: none)
 *
 * Errors follow rig/remote_abi.h: false plus a malloc'd *err starting with
 * a reason word (invalid:, failed:, unsupported:, system:, nomem:,
 * timeout:, or one of the executors' LOAD_REASONS for a refused load)
 * that names the culprit.  Outputs are set only on success. */
#ifndef RIG_REMOTE_H
#define RIG_REMOTE_H

#include <rig/api.h>
#include <rig/job.h>
#include <rig/remote_abi.h>

#include <mesh/backend.h>

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rig_remote rig_remote;

/* ---- opening and serving ------------------------------------------------ */

/* Options of rig_remote_open; rig_remote_options_init fills the defaults.
 * Each rank may pass its own (an agent's executors are its own). */
typedef struct {
    /* The executors this rank offers as an agent: a mask of
     * 1u << MESH_BACKEND_*; 0 (default): every executor that opens.  An
     * executor left out is described as "unsupported: left out by
     * RIG_REMOTE_EXECUTORS" (or "by the options").  RIG_REMOTE_EXECUTORS. */
    uint32_t executors;
} rig_remote_options;

/* Fills *opt with the defaults.  opt must not be NULL.  Any thread. */
RIG_API void rig_remote_options_init(rig_remote_options *opt);

/* Opens the remote layer on job, whose ranks are those of comm: comm must
 * be the communicator the job was opened on (the layer duplicates it for
 * its own messages; every rank's rank in comm must be its job rank).
 * Collective over comm.  Each agent opens its executors and describes its
 * machine; rank 0 gathers, makes the table and broadcasts it; every rank
 * makes the records.  A rank of one is a controller without machines.
 * Either every rank succeeds or every rank fails (naming its own cause or
 * "failed: rank N could not open: ..."), unless the job fails meanwhile:
 * then each returns "failed: " within 2 s.  A bad argument on some ranks
 * only (a NULL job or out, a bad option or setting, a comm rank that is
 * not the job rank) is agreed on in the first gather, so the others are
 * never left waiting; only a rank whose comm is MPI_COMM_NULL or of
 * another size than the job's cannot join comm's collectives and answers
 * at once alone (comm must be the same on every rank).  Errors:
 * "invalid:" for a NULL job or out, MPI_COMM_NULL, a comm whose ranks are
 * not the job's, a bad option or setting; "failed:" for a failed job or
 * another rank's error; "system:", "nomem:".  An
 * executor that does not open is no error: the machine's description says
 * why.  *out is released with rig_remote_close, before rig_job_close. */
RIG_API bool rig_remote_open(rig_job *job, MPI_Comm comm,
                             const rig_remote_options *opt, rig_remote **out,
                             char **err);

/* The job the layer was opened on; NULL for NULL.  Any thread. */
RIG_API rig_job *rig_remote_job(const rig_remote *rm);

/* Whether this rank is the controller (rank 0).  False for NULL. */
RIG_API bool rig_remote_is_controller(const rig_remote *rm);

/* An agent serves the controller: it runs the commands the controller
 * sends until the controller closes the layer (true) or the job fails
 * (false with "failed: " and the job's reason, within 2 s; every program
 * of this agent is then unloaded).  While serving it watches its running
 * programs and reports a crash to the controller at once.  Errors also:
 * "invalid:" for NULL or the controller (rank 0), or an agent that served
 * to the end already.  Call rig_remote_close afterwards.  One thread. */
RIG_API bool rig_remote_serve(rig_remote *rm, char **err);

/* Closes the layer.  Collective: the controller tells every agent to
 * unload its programs and stop serving, and returns once all did; an
 * agent that has not served to the end yet serves until then.  If the job
 * failed, each rank only unloads its own programs and frees what no MPI
 * request may still use (see Failure above), and returns within 2 s.
 * NULL is ignored.  No other call may use rm concurrently or after. */
RIG_API void rig_remote_close(rig_remote *rm);

/* ---- machines and records ----------------------------------------------- */

/* An executor of a machine as its agent described it. */
typedef struct {
    uint32_t kind; /* MESH_BACKEND_* */
    /* Whether it runs there; if not, why ("unsupported: no GPU", ...). */
    bool runs;
    const char *why;
    /* Its caps when it runs (the mailbox header's S_CAPS); strings owned by
     * the layer. */
    mesh_caps caps;
    /* CUDA: the device ordinal the agent opened; -1 for the others. */
    int64_t device;
} rig_remote_executor;

/* An agent's machine. */
typedef struct {
    int rank;             /* its agent's rank */
    const char *name;     /* "<hostname>:<rank>" */
    const char *hostname; /* as the agent's gethostname said */
    int32_t pid;          /* the agent's process */
    uint32_t numa_nodes;  /* hwloc's NUMA nodes (at least 1) */
    uint32_t cores;       /* hwloc's cores (at least 1) */
    /* The machine's node: equal for machines that share a kernel and its
     * System V shared memory (boot id, IPC namespace, host name), whose
     * programs then carry rails with plain stores. */
    const char *node;
    /* Indexed by kind, MESH_BACKEND_COUNT entries. */
    rig_remote_executor executors[MESH_BACKEND_COUNT];
} rig_remote_machine;

/* The machine of agent rank, or NULL for NULL, rank 0 or a rank out of
 * range.  Valid until rig_remote_close.  Any thread, any rank. */
RIG_API const rig_remote_machine *rig_remote_machine_of(const rig_remote *rm,
                                                        int rank);

/* The number of agent machines (the job's size - 1; 0 for NULL). */
RIG_API size_t rig_remote_machines(const rig_remote *rm);

/* One proxy: a host or a device of an agent's machine. */
typedef struct {
    const char *name; /* "vm:2" for a host, "cuda0@vm:2" for a device */
    int rank;         /* its machine's agent */
    rig_proxy record; /* Host or Device */
    /* The record under rig_remote_abi_key (rig_remote_abi_declare), the
     * proxy's one fact: rig_remote_abi_find(&p->fact, 1) == &p->record. */
    rig_capability fact;
} rig_remote_proxy;

/* Every proxy of the job, the same on every rank: per agent machine in
 * rank order, its Host, then its Devices.  Sets *out (valid until
 * rig_remote_close) and returns the count; 0 (and *out NULL) for NULL
 * arguments.  Any thread. */
RIG_API size_t rig_remote_proxies(const rig_remote *rm,
                                  const rig_remote_proxy **out);

/* The proxy named name, or NULL.  Any thread. */
RIG_API const rig_remote_proxy *rig_remote_find(const rig_remote *rm,
                                                const char *name);

/* The Host record of agent rank's machine (as in its proxy), or NULL for
 * NULL, rank 0 or out of range.  Its functions, through rig_host_rail and
 * rig_host_threads or called directly:
 *   threads(p)  what the machine's agent stated when it loaded program p:
 *               one entry per step of the program (rig's programs have one
 *               step): the most threads a group of a launch may have
 *               there -- CUDA: the threads of the blocks the device keeps
 *               resident at once for that kernel (blocks per SM, from the
 *               loaded kernel where the executor loads at prepare, else
 *               the device's most, x SMs x the manifest's threads); wasm:
 *               the lanes the executor may use (one thread each); native:
 *               the nodes that run at once, one per core the executor may
 *               use, x the manifest's threads.  0 entries for no such
 *               program (or one unloaded).  On the controller every
 *               machine's record answers; on an agent only its own.
 *   rail(peer)  on the controller, makes a rail between this machine
 *               and peer's (another agent's host record) or the
 *               controller's own machine (peer NULL) that carries send
 *               from this machine and receive to it (see Rails above);
 *               *out holds one reference (rig_rail_release), with the
 *               controller's local end for peer NULL and none otherwise.
 *               It returns once both ends are made.  Errors, whether
 *               called through rig_host_rail or directly, as compiled
 *               code does: "invalid:" at once, before any agent is
 *               contacted, for a NULL out, peer equal to this host, bad
 *               lists (rig_check_transfers' message), or a call on an
 *               agent (records make rails on the controller only);
 *               "foreign:" for a peer that is no host record of this
 *               layer; "failed:" for a failed job (also when it fails
 *               while the ends are made); "system:", "nomem:" naming the
 *               machine whose end could not be made (neither end is then
 *               left).
 * Valid until rig_remote_close.  Any thread. */
RIG_API const rig_host *rig_remote_host(const rig_remote *rm, int rank);

/* ---- programs (controller only) ----------------------------------------- */

/* What a load took, for benchmarks and logs.  Times in ms. */
typedef struct {
    uint64_t image_bytes; /* the payload's file bytes sent to each agent */
    size_t machines;      /* agents it was sent to */
    double hash_ms;       /* the controller hashing the payload */
    /* The controller: from the call until its command is posted to the
     * agents (the checks, the hash, the message). */
    double check_ms;
    double send_ms; /* the controller: image posted to sends done */
    /* The slowest agent: from its command to its last image byte. */
    double receive_ms;
    /* The slowest agent's prepare (checks, hash, compile). */
    double prepare_ms;
    double total_ms; /* the whole call on the controller */
} rig_remote_load_info;

/* Loads the program of payload src (mesh_payload_read; the caller keeps
 * it, unchanged while the call runs; after a "failed: " return -- the job
 * failed while the image was on its way -- MPI may still read its bytes,
 * so keep it until the process ends, as rig_remote_load_catalog does)
 * onto the agent machines ranks[0..nranks) (NULL and 0: every agent),
 * as described above, and sets *program to its new id.  Before anything
 * is sent, each machine's executors are checked against the manifest's
 * backends: "unsupported: machine vm:2 runs native, wasm; program p lists
 * cuda" (every such machine named, joined by "; ").  An agent's refusal
 * keeps its reason word in front: "hash: machine vm:2: program p hashes
 * to ..., expected ...".  info may be NULL.  Controller only; any thread.
 * Errors also: "invalid:" for NULL arguments, an agent rank out of range,
 * repeated or 0, no agents, a payload without a manifest; "manifest: ";
 * "failed:" when the job fails (then nothing is left loaded on machines
 * that still run); "nomem:".  Nothing is loaded anywhere on failure. */
RIG_API bool rig_remote_load(rig_remote *rm, const mesh_payload *src,
                             const int *ranks, size_t nranks,
                             rig_remote_load_info *info, int64_t *program,
                             char **err);

/* Reads program name of catalog root (mesh_payload_read) and loads it as
 * rig_remote_load does.  Errors also mesh_payload_read's. */
RIG_API bool rig_remote_load_catalog(rig_remote *rm, const char *root,
                                     const char *name, const int *ranks,
                                     size_t nranks, int64_t *program,
                                     char **err);

/* One input of a program bound, on one machine, to that machine's end of
 * a rail (see Programs and ends above). */
typedef struct {
    int rank;             /* the agent machine */
    uint32_t input;       /* the program's input there, < MESH_INPUTS */
    const rig_rail *rail; /* a rail made by a host record of this layer
                           * (held by the caller), with an end there */
} rig_remote_end;

/* rig_remote_load, binding the program's inputs to rail ends:
 * ends[0..nends) (NULL and 0: none), each on one of the load's machines;
 * an input left unbound on a machine has no end there (its bit of
 * P_READS is clear).  Each machine's program holds a reference on each
 * of its ends until it is unloaded.  Errors also, before any agent is
 * contacted: "invalid:" naming ends[i] for a NULL rail, a rail this
 * layer did not make (or whose controller's rail was released), a rank
 * not among the load's machines or without an end of that rail, an
 * input at or past MESH_INPUTS, bound twice on a machine, or named by
 * neither of the manifest's "reads" and "writes", an input the manifest
 * writes on an end that sends nothing (reads: receives nothing); and
 * from the machine: "invalid: machine vm:2: rail N's end is written by
 * program P already" (an end has one writer), mesh_ends_check's words.
 * Controller only; any thread. */
RIG_API bool rig_remote_load_ends(rig_remote *rm, const mesh_payload *src,
                                  const int *ranks, size_t nranks,
                                  const rig_remote_end *ends, size_t nends,
                                  rig_remote_load_info *info, int64_t *program,
                                  char **err);

/* rig_remote_load_catalog with ends, as rig_remote_load_ends. */
RIG_API bool rig_remote_load_catalog_ends(rig_remote *rm, const char *root,
                                          const char *name, const int *ranks,
                                          size_t nranks,
                                          const rig_remote_end *ends,
                                          size_t nends, int64_t *program,
                                          char **err);

/* Launches program on every machine it is loaded on with nodes nodes each
 * (0: the manifest's) and returns once every node on every machine is
 * online.  All or nothing: if a machine fails to launch (its executor's
 * "limits: ", "timeout: ", "load: " ...), the machines that started halt
 * again and the error names every machine that failed ("timeout: machine
 * vm:2: ...").  Errors also: "invalid:" for an unknown program or one
 * running already (halt it first), "failed:" -- also when the job fails
 * before every machine's reply is in, as when the program crashes at once
 * holding ends: its nodes may have started, and the job's reason is the
 * crash report.  Controller only. */
RIG_API bool rig_remote_launch(rig_remote *rm, int64_t program, uint32_t nodes,
                               char **err);

/* How a program stands on one machine. */
typedef enum {
    RIG_REMOTE_LOADED = 0,  /* loaded, not launched (or halted) */
    RIG_REMOTE_RUNNING = 1, /* launched; nodes still running */
    RIG_REMOTE_DONE = 2,    /* the launch's nodes all ended */
    RIG_REMOTE_CRASHED = 3  /* the launch ended abnormally */
} rig_remote_run;

typedef struct {
    int rank;            /* the machine's agent */
    const char *machine; /* its name (the layer's; valid until close) */
    uint32_t exec;       /* the executor running it (MESH_BACKEND_*) */
    rig_remote_run state;
    uint32_t nodes; /* of the current or last launch; 0: none yet */
    /* The launch's progress points (P_POINTS), as read on the machine. */
    uint64_t points[MESH_POINTS];
    /* RIG_REMOTE_CRASHED: the report, e.g. "node 2 of program p on vm:3
     * killed by signal 11"; NULL otherwise.  Owned by the array. */
    char *why;
} rig_remote_status;

/* Asks every machine of program how it stands: *out gets one entry per
 * machine, in rank order, *n their count; free with
 * rig_remote_status_free.  Errors: "invalid:" (NULL arguments, unknown
 * program), "failed:", "nomem:".  Controller only. */
RIG_API bool rig_remote_query(rig_remote *rm, int64_t program,
                              rig_remote_status **out, size_t *n, char **err);

/* Frees what rig_remote_query returned (NULL: nothing). */
RIG_API void rig_remote_status_free(rig_remote_status *s, size_t n);

/* Waits until the launch of program is done on every machine (true), or
 * one crashed ("failed: " with its report), at most timeout_ms (0: no
 * limit; then "timeout: " naming the machines still running).  It waits
 * for the machines' word: an agent looks at its running programs after
 * 1, 2 and 4 ms, then every 8 ms (each look takes a core from its nodes)
 * and tells the controller unasked when a launch ends, and the wait,
 * in naps growing to 1 ms, asks the machines (rig_remote_query) only when
 * every one has ended, one crashed, or the time is up -- so that a long
 * program's machines are not kept busy answering.  Any thread; the
 * layer's lock is not held between naps.
 * Errors also: "invalid:" for an unknown program or one not launched,
 * "failed:" when the job fails.  Controller only. */
RIG_API bool rig_remote_wait(rig_remote *rm, int64_t program,
                             uint32_t timeout_ms, char **err);

/* Halts program's launch on every machine (the executor's P_HALT, then
 * its unload of the slot); the program stays loaded and may be launched
 * again.  A program that is not launched is left alone.  Errors:
 * "invalid:" for an unknown program, the executors' unload errors naming
 * the machine (the slot is freed anyway), "failed:".  Controller only. */
RIG_API bool rig_remote_halt(rig_remote *rm, int64_t program, char **err);

/* Halts program if launched and unloads it from every machine; its id is
 * then unknown.  Errors as rig_remote_halt (the program is forgotten
 * whatever happens).  Controller only. */
RIG_API bool rig_remote_unload(rig_remote *rm, int64_t program, char **err);

/* The programs agent rank holds now, as the agent itself says (not the
 * controller's table): what a check that nothing was left loaded asks.
 * Sets *ids (malloc'd, ascending; NULL when none) and *n.  Errors:
 * "invalid:" for NULL arguments or a rank that is no agent, "failed:",
 * "nomem:".  Controller only. */
RIG_API bool rig_remote_programs_held(rig_remote *rm, int rank, int64_t **ids,
                                      size_t *n, char **err);

/* The rails whose ends agent rank holds now, as the agent itself says:
 * ends of rails the controller has not released, and ends a loaded
 * program still holds.  Sets *ids (malloc'd, ascending; NULL when none)
 * and *n.  Errors: "invalid:" for NULL arguments or a rank that is no
 * agent, "failed:", "nomem:".  Controller only. */
RIG_API bool rig_remote_ends_held(rig_remote *rm, int rank, int64_t **ids,
                                  size_t *n, char **err);

/* The next crash report the agents sent ("node 2 of program p on vm:3
 * killed by signal 11"), each handed out once: true with *event
 * (malloc'd), false when there is none now (*event NULL).  It first takes
 * in what has arrived, without waiting.  Controller only; any thread.
 * False also for NULL arguments. */
RIG_API bool rig_remote_event(rig_remote *rm, char **event);

#ifdef __cplusplus
}
#endif

#endif
