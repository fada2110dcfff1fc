/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * UnifiedBus (UB) user-space ABI.
 *
 * Shared by ub.ko, the user-space tools and the selftests. The character
 * device ioctls are added here as they land. The "ub" generic netlink
 * family is in <linux/ub_netlink.h>, generated from
 * Documentation/netlink/specs/ub.yaml by scripts/ynl-regen.
 */
#ifndef _UAPI_LINUX_UB_H
#define _UAPI_LINUX_UB_H

#include <linux/ub_netlink.h>

/* UDP destination port of UB over IPv4/IPv6 (IANA "unified-bus"). */
#define UB_UDP_DPORT	4792

#endif /* _UAPI_LINUX_UB_H */
