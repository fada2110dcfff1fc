// SPDX-License-Identifier: GPL-2.0
/*
 * Exports of the in-kernel TP Channel API, <linux/ub.h>. The functions are
 * Rust (kapi.rs); the kernel crate has no way to export a symbol from a
 * module, so this file does only that.
 */
#include <linux/export.h>
#include <linux/ub.h>

EXPORT_SYMBOL_GPL(ub_tp_open);
EXPORT_SYMBOL_GPL(ub_tp_send);
EXPORT_SYMBOL_GPL(ub_tp_close);
