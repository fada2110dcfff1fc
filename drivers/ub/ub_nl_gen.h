/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/* Do not edit directly, auto-generated from: */
/*	Documentation/netlink/specs/ub.yaml */
/* YNL-GEN kernel header */
/* To regenerate run: tools/net/ynl/ynl-regen.sh */

#ifndef _LINUX_UB_GEN_H
#define _LINUX_UB_GEN_H

#include <net/netlink.h>
#include <net/genetlink.h>

#include <uapi/linux/ub_netlink.h>

/* Common nested types */
extern const struct nla_policy ub_addr_nl_policy[UB_A_ADDR_IPV6 + 1];

int ub_nl_dev_get_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_dev_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int ub_nl_port_get_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_port_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int ub_nl_port_set_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_addr_add_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_addr_del_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_route_add_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_route_del_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_route_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int ub_nl_npi_set_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_echo_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tp_get_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tp_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int ub_nl_tp_new_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tp_set_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tp_del_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tpg_get_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tpg_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int ub_nl_tpg_new_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tpg_set_doit(struct sk_buff *skb, struct genl_info *info);
int ub_nl_tpg_del_doit(struct sk_buff *skb, struct genl_info *info);

enum {
	UB_NLGRP_MONITOR,
};

extern struct genl_family ub_nl_family;

#endif /* _LINUX_UB_GEN_H */
