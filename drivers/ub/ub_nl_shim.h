/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers of the "ub" generic netlink family, called from netlink.rs
 * (which declares them again in its extern block; keep both in step).
 * ub_nl_shim.c says what each wraps and why it is C.
 */
#ifndef _UB_NL_SHIM_H
#define _UB_NL_SHIM_H

#include <linux/types.h>

struct genl_info;
struct netlink_callback;
struct netlink_ext_ack;
struct nlattr;
struct sk_buff;

int ub_nl_register(void);
void ub_nl_unregister(void);
struct nlattr **ub_nl_dump_attrs(struct netlink_callback *cb);
u32 ub_nl_dump_maxattr(struct netlink_callback *cb);
struct netlink_ext_ack *ub_nl_dump_extack(struct netlink_callback *cb);
u32 *ub_nl_dump_cursor(struct netlink_callback *cb);
bool ub_nl_info_in_init_net(const struct genl_info *info);
u8 ub_nl_get_u8(const struct nlattr *nla);
u32 ub_nl_get_u32(const struct nlattr *nla);
u64 ub_nl_get_u64(const struct nlattr *nla);
const void *ub_nl_data(const struct nlattr *nla);
int ub_nl_len(const struct nlattr *nla);
int ub_nl_parse_addr(struct nlattr **tb, const struct nlattr *nest,
		     struct netlink_ext_ack *extack);
void ub_nl_set_err(struct netlink_ext_ack *extack, const char *msg,
		   const struct nlattr *bad_attr);
void ub_nl_set_missing(struct netlink_ext_ack *extack,
		       const struct nlattr *nest, u32 type);
struct sk_buff *ub_nl_msg_new(gfp_t gfp);
struct sk_buff *ub_nl_msg_new_small(size_t payload, gfp_t gfp);
void ub_nl_msg_free(struct sk_buff *skb);
void *ub_nl_put_reply(struct sk_buff *skb, struct genl_info *info, u8 cmd);
void *ub_nl_put_dump(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd);
void *ub_nl_put_event(struct sk_buff *skb, u8 cmd);
void ub_nl_msg_end(struct sk_buff *skb, void *hdr);
void ub_nl_msg_cancel(struct sk_buff *skb, void *hdr);
int ub_nl_reply(struct sk_buff *skb, struct genl_info *info);
int ub_nl_multicast_monitor(struct sk_buff *skb, gfp_t gfp);
int ub_nl_unicast_init_net(struct sk_buff *skb, u32 portid);
bool ub_nl_monitor_has_listeners(void);
int ub_nl_put_u8(struct sk_buff *skb, int type, u8 value);
int ub_nl_put_u32(struct sk_buff *skb, int type, u32 value);
int ub_nl_put_u64(struct sk_buff *skb, int type, u64 value, int pad);
int ub_nl_put_bytes(struct sk_buff *skb, int type, const void *data, int len);
struct nlattr *ub_nl_nest_start(struct sk_buff *skb, int type);
void ub_nl_nest_end(struct sk_buff *skb, struct nlattr *nest);
void ub_nl_nest_cancel(struct sk_buff *skb, struct nlattr *nest);

#endif /* _UB_NL_SHIM_H */
