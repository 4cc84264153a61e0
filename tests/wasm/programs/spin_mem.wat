;; SPDX-License-Identifier: BSD-3-Clause
;; spin_mem: ignores the halt, calls nothing, only touches its memory.
(module
  (import "mesh" "online" (func $online))
  (memory 1)
  (func (export "spin_mem")
    call $online
    (loop $step
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0))
        (i32.const 1)))
      (br $step))))
