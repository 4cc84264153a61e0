;; SPDX-License-Identifier: BSD-3-Clause
;; stubborn: ignores the halt but keeps raising a point (a check).
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (func (export "stubborn")
    (local $i i64)
    call $online
    (loop $step
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (drop (call $point (i32.const 0) (local.get $i)))
      (br $step))))
