;; SPDX-License-Identifier: BSD-3-Clause
;; trap: a wasm program whose node 1 traps on purpose.  Every node goes
;; online and counts, raising progress point 0, until halted; node 1, once
;; its count reaches 2^20, loads past the end of its one-page memory: an out
;; of bounds memory access that ends it while the others go on.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "node" (func $node (result i32)))
  (import "mesh" "halted" (func $halted (result i32)))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (memory 1)
  (func (export "trap")
    (local $i i64)
    call $online
    (block $done
      (loop $step
        (br_if $done (call $halted))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (drop (call $point (i32.const 0) (local.get $i)))
        (if (i32.and (i32.eq (call $node) (i32.const 1))
                     (i64.eq (local.get $i) (i64.const 0x100000)))
          (then (drop (i32.load (i32.const 70000)))))
        (br $step)))))
