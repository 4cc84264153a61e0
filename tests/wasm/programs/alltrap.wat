;; SPDX-License-Identifier: BSD-3-Clause
;; alltrap: every node waits for the halt, then all trap at once, by node
;; mod 3: an out of bounds load (guard page), runaway recursion (stack
;; guard), an integer divide by zero (the generated code's check).
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "node" (func $node (result i32)))
  (import "mesh" "halted" (func $halted (result i32)))
  (memory 1)
  (func $deep (param $n i32) (result i32)
    (local $r i32)
    (local.set $r (call $deep (i32.add (local.get $n) (i32.const 1))))
    (i32.store (i32.and (local.get $n) (i32.const 0xffc)) (local.get $r))
    (local.get $r))
  (func (export "alltrap")
    (local $k i32)
    call $online
    (loop $wait (br_if $wait (i32.eqz (call $halted))))
    (local.set $k (i32.rem_u (call $node) (i32.const 3)))
    (if (i32.eqz (local.get $k))
      (then (drop (i32.load (i32.const 0x7ffffff0)))))
    (if (i32.eq (local.get $k) (i32.const 1))
      (then (drop (call $deep (i32.const 0)))))
    (drop (i32.div_u (i32.const 1) (i32.sub (local.get $k) (i32.const 2))))))
