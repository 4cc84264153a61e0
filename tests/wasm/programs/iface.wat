;; SPDX-License-Identifier: BSD-3-Clause
;; iface: every import end to end.  Node n writes [slot, node, nodes,
;; halted] (4 x i32) to scratch offset n*16, reads it back and checks it,
;; raises point 0 to 100, point 1 to the scratch size, point 2 to 7; node 0
;; reports failure code 42.  Any mismatch is `unreachable` (a trap).
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "slot" (func $slot (result i32)))
  (import "mesh" "node" (func $node (result i32)))
  (import "mesh" "nodes" (func $nodes (result i32)))
  (import "mesh" "halted" (func $halted (result i32)))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (import "mesh" "fail" (func $fail (param i32)))
  (import "mesh" "scratch_size" (func $scratch_size (result i64)))
  (import "mesh" "scratch_read" (func $scratch_read (param i32 i64 i32)))
  (import "mesh" "scratch_write" (func $scratch_write (param i64 i32 i32)))
  (memory 1)
  (func (export "iface")
    (local $off i64)
    call $online
    call $online
    (i32.store (i32.const 0) (call $slot))
    (i32.store (i32.const 4) (call $node))
    (i32.store (i32.const 8) (call $nodes))
    (i32.store (i32.const 12) (call $halted))
    (local.set $off (i64.extend_i32_u (i32.mul (call $node) (i32.const 16))))
    (call $scratch_write (local.get $off) (i32.const 0) (i32.const 16))
    (call $scratch_read (i32.const 64) (local.get $off) (i32.const 16))
    (if (i64.ne (i64.load (i32.const 0)) (i64.load (i32.const 64)))
      (then unreachable))
    (if (i64.ne (i64.load (i32.const 8)) (i64.load (i32.const 72)))
      (then unreachable))
    (if (i32.ne (call $point (i32.const 9) (i64.const 1)) (i32.const 0))
      (then unreachable))
    (drop (call $point (i32.const 0) (i64.const 100)))
    (drop (call $point (i32.const 1) (call $scratch_size)))
    (drop (call $point (i32.const 2) (i64.const 7)))
    (if (i32.eqz (call $node)) (then (call $fail (i32.const 42))))))
