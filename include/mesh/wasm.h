/* SPDX-License-Identifier: BSD-3-Clause */
/* mesh/wasm.h: the host interface a wasm program imports, and its rules.
 *
 * A wasm program is a catalog directory (mesh/loader.h) whose manifest
 * lists "wasm" in its backends and whose module is the file the manifest's
 * "wasm" key names ("<name>.wasm" by default).  The wasm backend compiles
 * the module ahead of time (wabt's wasm2c, then the system C compiler, into
 * a shared object cached per user by the payload's hash) and runs one
 * instance of it per node, each on a lease lane: a thread of rig's process
 * bound with hwloc to one core of those the backend may use.
 *
 * The module.  Version 1 of the binary format, the features wasm2c enables
 * by default, at most one memory (not shared), and:
 *   - an exported function named by the manifest's "entry" (default: the
 *     program's name) of type [] -> []: a node runs it once, from start to
 *     return; returning ends the node cleanly (it counts in P_EXITED);
 *   - imports only the functions below, all from module "mesh"
 *     (MESH_WASM_IMPORT_MODULE), each with exactly the type shown; a module
 *     that imports anything else, or no entry, is refused at prepare with
 *     "unsupported: " or "compile: " naming the culprit.
 *
 * The imports, in the text format's notation:
 *
 *   (func $online)                       go online: counts the node in
 *                                        P_ONLINE, once (later calls do
 *                                        nothing).  A launch whose nodes are
 *                                        not all online within the online
 *                                        timeout fails with "timeout: ".
 *   (func $slot (result i32))            the program's slot, 0..31
 *   (func $node (result i32))            this node's index, 0..nodes-1
 *   (func $nodes (result i32))           the nodes of the launch
 *   (func $halted (result i32))          1 once the host asked the slot to
 *                                        halt (P_HALT), else 0: the program
 *                                        should then return from its entry
 *   (func $point (param i32 i64) (result i32))
 *                                        raises progress point i (< 8) to at
 *                                        least value (release: what the
 *                                        node wrote to the scratch before is
 *                                        visible to the point's reader);
 *                                        1, or 0 for i out of range
 *   (func $fail (param i32))             reports the program's own failure
 *                                        code (P_ERROR = MESH_NODE_ERR_
 *                                        PROGRAM, the code in P_ERROR_ARG;
 *                                        the slot's first report sticks)
 *   (func $scratch_size (result i64))    bytes of the program's scratch,
 *                                        shared by its nodes (manifest
 *                                        "scratch"; 0: none)
 *   (func $scratch_read (param $dst i32) (param $off i64) (param $len i32))
 *                                        copies len bytes of the scratch at
 *                                        off into linear memory at dst
 *   (func $scratch_write (param $off i64) (param $src i32) (param $len i32))
 *                                        copies len bytes of linear memory
 *                                        at src into the scratch at off
 *
 * Scratch copies are plain byte copies: nodes that share a range order
 * their accesses with progress points (or their own protocol).
 *
 * Rail ends.  A program's inputs (mesh/abi/ends.h: the rail ends its
 * manifest's "reads" and "writes" name, which the host binds per
 * machine) are reached through these imports; $input is the input's
 * number (0..31), $copy the copy (0 or 1) of a landing area, $c a count:
 *
 *   (func $end_bound (param $input i32) (result i32))
 *                                        1 when the input has an end here
 *   (func $end_id (param i32) (result i64))      the rail's id (-1: none)
 *   (func $end_find (param $id i64) (result i32))
 *                                        the input bound to the rail of that
 *                                        id here, or -1: a program finds its
 *                                        end by rail id
 *   (func $end_peer (param i32) (result i32))    the machine at the other
 *   (func $end_here (param i32) (result i32))    end and this one (job
 *                                                ranks; -1: none)
 *   (func $end_bytes (param $input i32) (param $dir i32) (result i64))
 *                                        bytes of one copy of the outbound
 *                                        ($dir 0) or inbound (1); 0: none
 *   (func $end_write (param $input i32) (param $copy i32) (param $off i64)
 *                    (param $src i32) (param $len i32))
 *                                        copies len bytes of linear memory
 *                                        at src to off in the outbound copy
 *   (func $end_read (param $input i32) (param $copy i32) (param $off i64)
 *                   (param $dst i32) (param $len i32))
 *                                        copies len bytes at off of the
 *                                        inbound copy to linear memory
 *   (func $end_ready (param $input i32) (param $c i64))
 *                                        readies the end to c (the rail
 *                                        carries every transfer up to it)
 *   (func $end_wait_arrived (param $input i32) (param $c i64) (result i32))
 *   (func $end_wait_sent (param $input i32) (param $c i64) (result i32))
 *                                        1 once `arrived` (`sent`) >= c; 0
 *                                        when the rail failed or the slot
 *                                        was halted
 *   (func $end_arrived (param i32) (result i64))  the counts (acquire)
 *   (func $end_sent (param i32) (result i64))
 *
 * A range outside the copy or the memory, a copy past 1, or an input with
 * no end here (but for end_bound, end_id, end_peer, end_here and
 * end_bytes) traps.  The copies are the design measured against mapping
 * the end's pages into the module's memory (examples/remote/README.md):
 * an import call costs a few nanoseconds beside the copy a program makes
 * anyway from its own arrays, and a mapping would put memory another
 * machine writes into the middle of the module's sandbox.
 *
 * Sandboxing.  A node touches only its own linear memory (guard pages
 * around it: an access outside traps), the scratch through the two copies
 * above (a range outside the scratch or the memory traps), and the mailbox
 * words the imports name.  A trap -- out of bounds memory access, integer
 * divide by zero, unreachable, call stack exhausted, ... -- ends that node
 * only: the other nodes go on, and the backend reports the first trap of
 * the launch once through `crashed`: "node 1 trapped: out of bounds memory
 * access".
 *
 * Halting.  Unloading a program raises P_HALT; nodes get RIG_MESH_HALT_MS
 * (500) to return.  A node still running then is ended within
 * RIG_MESH_GRACE_MS (1000), whatever its code does: at its next call of
 * any import or memory.grow, or its next access to its linear memory (the
 * backend revokes the memory's pages), each of which traps it; and a node
 * that does none of these -- a loop that neither calls the host nor
 * touches memory -- is interrupted: the backend sends its lane a real-time
 * signal (RIG_WASM_HALT_SIGNAL) every millisecond, and the first that
 * finds the lane in the module's own code unwinds the node (one that finds
 * it in a host call or libc does nothing).  No check is compiled into the
 * module: its code runs as fast as wasm2c's.  The lane is then free for
 * the next launch.  Only where the signal cannot be handled (a machine
 * whose signal context rig does not know: not x86-64, AArch64 or POWER)
 * can a node outlive the grace period: its lane is then abandoned (it
 * keeps its core busy until the process exits), its code stays mapped, and
 * the unload reports "timeout: node N of <program> ignored the halt ...".
 *
 * Compiling.  wasm2c and the C compiler run under a keeper each (see
 * mesh/worker.h): past RIG_WASM_COMPILE_TIMEOUT_MS the run ends with all
 * it started (cc's cc1, as, ld), and their temporary files, which go to
 * the run's work directory (TMPDIR), go with it.
 *
 * Settings (environment):
 *   RIG_WASM2C                 wasm2c to run (default: the one configure
 *                              found)
 *   RIG_WASM_CC                the C compiler (default "cc")
 *   RIG_WASM_RT_DIR            directory of wasm-rt.h (default: the one
 *                              configure found, /usr/src/wasm2c)
 *   RIG_WASM_CACHE             directory of compiled modules (default
 *                              $XDG_CACHE_HOME/rig/wasm, else
 *                              /tmp/rig-wasm-<uid>); it must belong to the
 *                              user and not be writable by others
 *   RIG_WASM_COMPILE_TIMEOUT_MS  a wasm2c or compiler run is killed past it
 *                              (120000)
 *   RIG_WASM_CORES             use at most this many cores for lanes
 *                              (default: every core the process may use)
 *   RIG_WASM_HALT_SIGNAL       the real-time signal that interrupts a lane
 *                              (default SIGRTMAX - 4); the backend refuses
 *                              to open ("unsupported: ") when the
 *                              application handles that signal itself.
 *                              Read once per process.
 *
 * Header only: constants for embedders and tools; the backend itself is
 * opened with mesh_backend_open(MESH_BACKEND_WASM, ...) (mesh/executors.h).
 */
#ifndef MESH_WASM_H
#define MESH_WASM_H

/* The module name every import of a wasm program comes from. */
#define MESH_WASM_IMPORT_MODULE "mesh"

/* The progress points a node may raise (P_POINTS). */
#define MESH_WASM_POINTS 8u

#endif
