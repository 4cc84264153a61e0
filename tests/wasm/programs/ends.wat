;; SPDX-License-Identifier: BSD-3-Clause
;; ends: input 0's rail end through the mesh.end_* imports.  "ends" answers
;; each of 100 runs of 64 bytes with every byte plus one (point 0: the runs,
;; 1: the rail's id, 2: bound(0) * 100 + bound(3) * 10 + (one inbound copy
;; is 256 bytes), 3: 1 + the input end_find gives for id 42, and 9 more
;; when id 43 has none); the others each break one rule and must trap: a range
;; past the copy, an input without an end, copy 2, a memory range past the
;; module's memory.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (import "mesh" "end_bound" (func $bound (param i32) (result i32)))
  (import "mesh" "end_id" (func $id (param i32) (result i64)))
  (import "mesh" "end_find" (func $find (param i64) (result i32)))
  (import "mesh" "end_bytes" (func $bytes (param i32 i32) (result i64)))
  (import "mesh" "end_read" (func $read (param i32 i32 i64 i32 i32)))
  (import "mesh" "end_write" (func $write (param i32 i32 i64 i32 i32)))
  (import "mesh" "end_ready" (func $ready (param i32 i64)))
  (import "mesh" "end_wait_arrived" (func $wait (param i32 i64) (result i32)))
  (import "mesh" "end_wait_sent" (func $wsent (param i32 i64) (result i32)))
  (memory 1)
  (func (export "ends")
    (local $c i64) (local $i i32) (local $k i32)
    call $online
    (drop (call $point (i32.const 1) (call $id (i32.const 0))))
    (drop (call $point (i32.const 2)
      (i64.extend_i32_u
        (i32.add
          (i32.add (i32.mul (call $bound (i32.const 0)) (i32.const 100))
                   (i32.mul (call $bound (i32.const 3)) (i32.const 10)))
          (i64.eq (call $bytes (i32.const 0) (i32.const 1)) (i64.const 256))))))
    (drop (call $point (i32.const 3)
      (i64.extend_i32_u
        (i32.add
          (i32.add (call $find (i64.const 42)) (i32.const 1))
          (i32.mul (i32.eq (call $find (i64.const 43)) (i32.const -1))
                   (i32.const 9))))))
    (local.set $c (i64.const 1))
    (block $done
      (loop $run
        (br_if $done (i64.gt_u (local.get $c) (i64.const 100)))
        (br_if $done (i32.eqz (call $wait (i32.const 0) (local.get $c))))
        (local.set $k (i32.wrap_i64
          (i64.rem_u (i64.sub (local.get $c) (i64.const 1)) (i64.const 2))))
        (call $read (i32.const 0) (local.get $k) (i64.const 0) (i32.const 0)
          (i32.const 64))
        (local.set $i (i32.const 0))
        (loop $b
          (i32.store8 (local.get $i)
            (i32.add (i32.load8_u (local.get $i)) (i32.const 1)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $b (i32.lt_u (local.get $i) (i32.const 64))))
        (if (i64.gt_u (local.get $c) (i64.const 2))
          (then (drop (call $wsent (i32.const 0)
            (i64.sub (local.get $c) (i64.const 2))))))
        (call $write (i32.const 0) (local.get $k) (i64.const 0) (i32.const 0)
          (i32.const 64))
        (call $ready (i32.const 0) (local.get $c))
        (drop (call $point (i32.const 0) (local.get $c)))
        (local.set $c (i64.add (local.get $c) (i64.const 1)))
        (br $run))))
  (func (export "oob_range")
    call $online
    (call $write (i32.const 0) (i32.const 0) (i64.const 250) (i32.const 0)
      (i32.const 8)))
  (func (export "oob_input")
    call $online
    (call $write (i32.const 3) (i32.const 0) (i64.const 0) (i32.const 0)
      (i32.const 8)))
  (func (export "oob_copy")
    call $online
    (call $read (i32.const 0) (i32.const 2) (i64.const 0) (i32.const 0)
      (i32.const 8)))
  (func (export "oob_mem")
    call $online
    (call $read (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 65530)
      (i32.const 64))))
