;; SPDX-License-Identifier: BSD-3-Clause
;; no_entry: exports a function, but not the manifest's entry.
(module
  (func (export "something_else")))
