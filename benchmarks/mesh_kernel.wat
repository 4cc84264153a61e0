;; SPDX-License-Identifier: BSD-3-Clause
;; mesh_kernel: a compute-bound wasm node for benchmarks/mesh_bench.c.
;; Calls (a recursive fib), loop heads (a 1-D stencil sweep over linear
;; memory) and no import in the hot path; point 0 gets the checksum.
(module
  (import "mesh" "online" (func $online))
  (import "mesh" "point" (func $point (param i32 i64) (result i32)))
  (memory 4)
  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func $sweep (param $sweeps i32) (result i64)
    (local $i i32) (local $s i32) (local $acc i64) (local $v i64)
    ;; 32768 i64 cells; cell i = i at start
    (local.set $i (i32.const 0))
    (loop $init
      (i64.store (i32.shl (local.get $i) (i32.const 3))
                 (i64.extend_i32_u (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $init (i32.lt_u (local.get $i) (i32.const 32768))))
    (loop $outer
      (local.set $i (i32.const 1))
      (loop $inner
        (local.set $v
          (i64.add
            (i64.load (i32.shl (i32.sub (local.get $i) (i32.const 1)) (i32.const 3)))
            (i64.mul (i64.load (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 3)))
                     (i64.const 3))))
        (i64.store (i32.shl (local.get $i) (i32.const 3))
                   (i64.xor (local.get $v) (i64.shr_u (local.get $v) (i64.const 7))))
        (local.set $acc (i64.add (local.get $acc) (local.get $v)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $inner (i32.lt_u (local.get $i) (i32.const 32767))))
      (local.set $s (i32.add (local.get $s) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $s) (local.get $sweeps))))
    (local.get $acc))
  (func (export "mesh_kernel")
    call $online
    (drop (call $point (i32.const 0)
      (i64.add (call $sweep (i32.const 6000))
               (i64.extend_i32_u (call $fib (i32.const 32))))))))
