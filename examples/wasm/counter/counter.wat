;; SPDX-License-Identifier: BSD-3-Clause
;; counter: a wasm program that counts until halted.  Each node goes
;; online, then raises progress point 0 to its count at every step and
;; returns once the host asks the slot to halt.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "halted" (func $halted (result i32)))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (memory 1)
  (func (export "counter")
    (local $i i64)
    call $online
    (block $done
      (loop $step
        (br_if $done (call $halted))
        (local.set $i (i64.add (local.get $i) (i64.const 1)))
        (drop (call $point (i32.const 0) (local.get $i)))
        (br $step)))))
