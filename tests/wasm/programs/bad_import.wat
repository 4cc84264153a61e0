;; SPDX-License-Identifier: BSD-3-Clause
;; bad_import: imports a function rig does not provide.
(module
  (import "env" "printf" (func $printf (param i32) (result i32)))
  (func (export "bad_import")))
