;; SPDX-License-Identifier: BSD-3-Clause
;; wsum: the remote tests' wasm program.  Each node goes online, adds
;; j * (node + 1) for j = 1..100000 and raises progress point `node` to
;; the sum, (node + 1) * 5000050000, then returns.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "node" (func $node (result i32)))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (memory 1)
  (func (export "wsum")
    (local $j i64)
    (local $k i64)
    (local $s i64)
    call $online
    (local.set $k (i64.add (i64.extend_i32_u (call $node)) (i64.const 1)))
    (local.set $j (i64.const 1))
    (block $done
      (loop $step
        (br_if $done (i64.gt_u (local.get $j) (i64.const 100000)))
        (local.set $s (i64.add (local.get $s)
                               (i64.mul (local.get $j) (local.get $k))))
        (local.set $j (i64.add (local.get $j) (i64.const 1)))
        (br $step)))
    (drop (call $point (call $node) (local.get $s)))))
