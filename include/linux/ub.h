/* SPDX-License-Identifier: GPL-2.0 */
/*
 * UnifiedBus (UB) in-kernel API, for modules that use TP Channels
 * (see samples/ub/). The exported functions are declared here as they land.
 */
#ifndef _LINUX_UB_H
#define _LINUX_UB_H

#include <uapi/linux/ub.h>

#endif /* _LINUX_UB_H */
