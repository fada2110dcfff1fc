// SPDX-License-Identifier: GPL-2.0
/*
 * C side of the "ub" generic netlink family (Documentation/ub/netlink.rst).
 *
 * The family, its policies and split ops are generated from the spec into
 * ub_nl_gen.c; the handlers they name are Rust (netlink.rs). What is here is
 * what Rust cannot reach through the kernel crate's bindings in Linux 7.3:
 * static inline helpers and macros of <net/netlink.h> and <net/genetlink.h>
 * (nla_get_*, nla_put_*, nla_nest_*, nla_parse_nested, genlmsg_reply,
 * genlmsg_unicast, NL_SET_ERR_MSG_ATTR, NL_SET_ERR_ATTR_MISS, the dump
 * context) and the generated family object itself. Each function is one
 * call of such a helper and keeps no state; pointer arguments are as valid
 * as the helper requires (netlink.rs says why at each call).
 */

#include <linux/netlink.h>
#include <net/genetlink.h>
#include <net/net_namespace.h>
#include <net/netlink.h>

#include "ub_nl_gen.h"
#include "ub_nl_shim.h"

/* Registration (netlink.rs: Registration). */

int ub_nl_register(void)
{
	return genl_register_family(&ub_nl_family);
}

void ub_nl_unregister(void)
{
	genl_unregister_family(&ub_nl_family);
}

/* Requests. */

/* The request attributes of a dump (parsed with the dump op's policy). */
struct nlattr **ub_nl_dump_attrs(struct netlink_callback *cb)
{
	return genl_info_dump(cb)->attrs;
}

/* maxattr of the dump op's policy: the bound of ub_nl_dump_attrs(). */
u32 ub_nl_dump_maxattr(struct netlink_callback *cb)
{
	return genl_dumpit_info(cb)->op.maxattr;
}

struct netlink_ext_ack *ub_nl_dump_extack(struct netlink_callback *cb)
{
	return cb->extack;
}

/*
 * Where a dump resumes: two u32 cursors over cb->ctx (zeroed by netlink at
 * the start of each dump), instead of the deprecated cb->args.
 */
struct ub_nl_dump_ctx {
	u32 dev;
	u32 item;
};

u32 *ub_nl_dump_cursor(struct netlink_callback *cb)
{
	NL_ASSERT_CTX_FITS(struct ub_nl_dump_ctx);
	return (u32 *)cb->ctx;
}

bool ub_nl_info_in_init_net(const struct genl_info *info)
{
	return net_eq(genl_info_net(info), &init_net);
}

u8 ub_nl_get_u8(const struct nlattr *nla)
{
	return nla_get_u8(nla);
}

u32 ub_nl_get_u32(const struct nlattr *nla)
{
	return nla_get_u32(nla);
}

u64 ub_nl_get_u64(const struct nlattr *nla)
{
	return nla_get_u64(nla);
}

const void *ub_nl_data(const struct nlattr *nla)
{
	return nla_data(nla);
}

int ub_nl_len(const struct nlattr *nla)
{
	return nla_len(nla);
}

/*
 * An address nest into tb[0..=UB_A_ADDR_MAX]. The outer policy
 * (NLA_POLICY_NESTED(ub_addr_nl_policy)) has validated it already.
 */
int ub_nl_parse_addr(struct nlattr **tb, const struct nlattr *nest,
		     struct netlink_ext_ack *extack)
{
	return nla_parse_nested(tb, UB_A_ADDR_MAX, nest, ub_addr_nl_policy,
				extack);
}

/*
 * Extended ACK: what NL_SET_ERR_MSG_ATTR() does, for a message that is not
 * a literal (the macro copies its literal into a static array). @msg must
 * be static: netlink keeps the pointer until it sends the ACK.
 */
void ub_nl_set_err(struct netlink_ext_ack *extack, const char *msg,
		   const struct nlattr *bad_attr)
{
	if (!extack)
		return;
	extack->_msg = msg;
	extack->bad_attr = bad_attr;
}

/* Missing attribute @type (of the nest @nest, or of the message if NULL). */
void ub_nl_set_missing(struct netlink_ext_ack *extack,
		       const struct nlattr *nest, u32 type)
{
	NL_SET_ERR_MSG(extack, "Missing attribute");
	NL_SET_ERR_ATTR_MISS(extack, nest, type);
}

/* Messages. */

struct sk_buff *ub_nl_msg_new(gfp_t gfp)
{
	return genlmsg_new(NLMSG_GOODSIZE, gfp);
}

/* A message of at most @payload bytes: what it takes of the reader's
 * receive buffer is its true size, so a small event must not take a page.
 */
struct sk_buff *ub_nl_msg_new_small(size_t payload, gfp_t gfp)
{
	return genlmsg_new(payload, gfp);
}

void ub_nl_msg_free(struct sk_buff *skb)
{
	nlmsg_free(skb);
}

void *ub_nl_put_reply(struct sk_buff *skb, struct genl_info *info, u8 cmd)
{
	return genlmsg_put_reply(skb, info, &ub_nl_family, 0, cmd);
}

void *ub_nl_put_dump(struct sk_buff *skb, struct netlink_callback *cb, u8 cmd)
{
	return genlmsg_put(skb, NETLINK_CB(cb->skb).portid, cb->nlh->nlmsg_seq,
			   &ub_nl_family, NLM_F_MULTI, cmd);
}

void *ub_nl_put_event(struct sk_buff *skb, u8 cmd)
{
	return genlmsg_put(skb, 0, 0, &ub_nl_family, 0, cmd);
}

void ub_nl_msg_end(struct sk_buff *skb, void *hdr)
{
	genlmsg_end(skb, hdr);
}

void ub_nl_msg_cancel(struct sk_buff *skb, void *hdr)
{
	genlmsg_cancel(skb, hdr);
}

/* These three consume @skb whatever they return. */

int ub_nl_reply(struct sk_buff *skb, struct genl_info *info)
{
	return genlmsg_reply(skb, info);
}

int ub_nl_multicast_monitor(struct sk_buff *skb, gfp_t gfp)
{
	return genlmsg_multicast(&ub_nl_family, skb, 0, UB_NLGRP_MONITOR, gfp);
}

int ub_nl_unicast_init_net(struct sk_buff *skb, u32 portid)
{
	return genlmsg_unicast(&init_net, skb, portid);
}

bool ub_nl_monitor_has_listeners(void)
{
	return genl_has_listeners(&ub_nl_family, &init_net, UB_NLGRP_MONITOR);
}

int ub_nl_put_u8(struct sk_buff *skb, int type, u8 value)
{
	return nla_put_u8(skb, type, value);
}

int ub_nl_put_u32(struct sk_buff *skb, int type, u32 value)
{
	return nla_put_u32(skb, type, value);
}

int ub_nl_put_u64(struct sk_buff *skb, int type, u64 value, int pad)
{
	return nla_put_u64_64bit(skb, type, value, pad);
}

int ub_nl_put_bytes(struct sk_buff *skb, int type, const void *data, int len)
{
	return nla_put(skb, type, len, data);
}

struct nlattr *ub_nl_nest_start(struct sk_buff *skb, int type)
{
	return nla_nest_start(skb, type);
}

void ub_nl_nest_end(struct sk_buff *skb, struct nlattr *nest)
{
	nla_nest_end(skb, nest);
}

void ub_nl_nest_cancel(struct sk_buff *skb, struct nlattr *nest)
{
	nla_nest_cancel(skb, nest);
}
