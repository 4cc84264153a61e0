;; SPDX-License-Identifier: BSD-3-Clause
;; quick: goes online, raises point 0 and returns.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (memory 1)
  (func (export "quick")
    call $online
    (drop (call $point (i32.const 0) (i64.const 1)))))
