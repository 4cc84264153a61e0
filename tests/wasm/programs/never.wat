;; SPDX-License-Identifier: BSD-3-Clause
;; never: a loop that never checks (no import call, no memory access).
(module
  (import "mesh" "online" (func $online))
  (func (export "never")
    call $online
    (loop $step (br $step))))
