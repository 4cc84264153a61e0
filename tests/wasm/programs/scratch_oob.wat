;; SPDX-License-Identifier: BSD-3-Clause
;; scratch_oob: writes 8 bytes at scratch_size - 4: the host traps it.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "scratch_size" (func $scratch_size (result i64)))
  (import "mesh" "scratch_write" (func $scratch_write (param i64 i32 i32)))
  (memory 1)
  (func (export "scratch_oob")
    call $online
    (call $scratch_write (i64.sub (call $scratch_size) (i64.const 4))
      (i32.const 0) (i32.const 8))))
