/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * UnifiedBus (UB) user-space ABI.
 *
 * Shared by ub.ko, the user-space tools and the selftests. The character
 * device ioctls and the "ub" generic netlink family are added here as they
 * land (the netlink part is generated from
 * Documentation/netlink/specs/ub.yaml).
 */
#ifndef _UAPI_LINUX_UB_H
#define _UAPI_LINUX_UB_H

/* UDP destination port of UB over IPv4/IPv6 (IANA "unified-bus"). */
#define UB_UDP_DPORT	4792

#endif /* _UAPI_LINUX_UB_H */
