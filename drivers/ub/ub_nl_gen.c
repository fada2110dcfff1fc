// SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause)
/* Do not edit directly, auto-generated from: */
/*	Documentation/netlink/specs/ub.yaml */
/* YNL-GEN kernel source */
/* To regenerate run: tools/net/ynl/ynl-regen.sh */

#include <net/netlink.h>
#include <net/genetlink.h>

#include "ub_nl_gen.h"

#include <uapi/linux/ub_netlink.h>

/* Integer value ranges */
static const struct netlink_range_validation ub_a_addr_cna_range = {
	.max	= 16777215ULL,
};

static const struct netlink_range_validation ub_a_dev_npi_range = {
	.max	= 33554431ULL,
};

static const struct netlink_range_validation ub_a_tp_rto_static_us_range = {
	.min	= 512ULL,
	.max	= 4000000ULL,
};

static const struct netlink_range_validation ub_a_tp_rto_base_us_range = {
	.min	= 4ULL,
	.max	= 2097152ULL,
};

static const struct netlink_range_validation ub_a_tp_lb_key_range = {
	.max	= 65535ULL,
};

static const struct netlink_range_validation ub_a_tp_send_window_range = {
	.min	= 1ULL,
	.max	= 8388607ULL,
};

/* Common nested types */
const struct nla_policy ub_addr_nl_policy[UB_A_ADDR_IPV6 + 1] = {
	[UB_A_ADDR_TYPE] = NLA_POLICY_MAX(NLA_U32, 3),
	[UB_A_ADDR_CNA] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_addr_cna_range),
	[UB_A_ADDR_IPV4] = NLA_POLICY_EXACT_LEN(4),
	[UB_A_ADDR_IPV6] = NLA_POLICY_EXACT_LEN(16),
};

/* UB_CMD_DEV_GET - do */
static const struct nla_policy ub_dev_get_nl_policy[UB_A_DEV_INDEX + 1] = {
	[UB_A_DEV_INDEX] = { .type = NLA_U32, },
};

/* UB_CMD_PORT_GET - do */
static const struct nla_policy ub_port_get_do_nl_policy[UB_A_PORT_INDEX + 1] = {
	[UB_A_PORT_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_PORT_INDEX] = NLA_POLICY_MAX(NLA_U32, 63),
};

/* UB_CMD_PORT_GET - dump */
static const struct nla_policy ub_port_get_dump_nl_policy[UB_A_PORT_DEV_INDEX + 1] = {
	[UB_A_PORT_DEV_INDEX] = { .type = NLA_U32, },
};

/* UB_CMD_PORT_SET - do */
static const struct nla_policy ub_port_set_nl_policy[UB_A_PORT_WANT_SHARING + 1] = {
	[UB_A_PORT_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_PORT_INDEX] = NLA_POLICY_MAX(NLA_U32, 63),
	[UB_A_PORT_ADMIN_UP] = NLA_POLICY_MAX(NLA_U8, 1),
	[UB_A_PORT_NUM_RETRY_THRESHOLD] = NLA_POLICY_MIN(NLA_U8, 2),
	[UB_A_PORT_NUM_PHY_REINIT_THRESHOLD] = NLA_POLICY_MIN(NLA_U8, 1),
	[UB_A_PORT_WANT_SHARING] = NLA_POLICY_MAX(NLA_U8, 1),
};

/* UB_CMD_ADDR_ADD - do */
static const struct nla_policy ub_addr_add_nl_policy[UB_A_DEV_ADDR + 1] = {
	[UB_A_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_DEV_ADDR] = NLA_POLICY_NESTED(ub_addr_nl_policy),
};

/* UB_CMD_ADDR_DEL - do */
static const struct nla_policy ub_addr_del_nl_policy[UB_A_DEV_ADDR + 1] = {
	[UB_A_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_DEV_ADDR] = NLA_POLICY_NESTED(ub_addr_nl_policy),
};

/* UB_CMD_ROUTE_ADD - do */
static const struct nla_policy ub_route_add_nl_policy[UB_A_ROUTE_LOAD_BALANCE + 1] = {
	[UB_A_ROUTE_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_ROUTE_DST] = NLA_POLICY_NESTED(ub_addr_nl_policy),
	[UB_A_ROUTE_PREFIX_LEN] = NLA_POLICY_MAX(NLA_U32, 128),
	[UB_A_ROUTE_PORTS] = { .type = NLA_U64, },
	[UB_A_ROUTE_LOAD_BALANCE] = NLA_POLICY_MAX(NLA_U32, 1),
};

/* UB_CMD_ROUTE_DEL - do */
static const struct nla_policy ub_route_del_nl_policy[UB_A_ROUTE_PREFIX_LEN + 1] = {
	[UB_A_ROUTE_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_ROUTE_DST] = NLA_POLICY_NESTED(ub_addr_nl_policy),
	[UB_A_ROUTE_PREFIX_LEN] = NLA_POLICY_MAX(NLA_U32, 128),
};

/* UB_CMD_ROUTE_GET - dump */
static const struct nla_policy ub_route_get_nl_policy[UB_A_ROUTE_DEV_INDEX + 1] = {
	[UB_A_ROUTE_DEV_INDEX] = { .type = NLA_U32, },
};

/* UB_CMD_NPI_SET - do */
static const struct nla_policy ub_npi_set_nl_policy[UB_A_DEV_NPI + 1] = {
	[UB_A_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_DEV_NPI_MODE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_DEV_NPI] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_dev_npi_range),
};

/* UB_CMD_ECHO - do */
static const struct nla_policy ub_echo_nl_policy[UB_A_ECHO_SIZE + 1] = {
	[UB_A_ECHO_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_ECHO_DST] = NLA_POLICY_NESTED(ub_addr_nl_policy),
	[UB_A_ECHO_ID] = { .type = NLA_U32, },
	[UB_A_ECHO_SEQ] = { .type = NLA_U32, },
	[UB_A_ECHO_SIZE] = NLA_POLICY_MAX(NLA_U32, 4096),
};

/* UB_CMD_TP_GET - do */
static const struct nla_policy ub_tp_get_do_nl_policy[UB_A_TP_TPN + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
};

/* UB_CMD_TP_GET - dump */
static const struct nla_policy ub_tp_get_dump_nl_policy[UB_A_TP_DEV_INDEX + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
};

/* UB_CMD_TP_NEW - do */
static const struct nla_policy ub_tp_new_nl_policy[UB_A_TP_SEND_WINDOW + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_PEER] = NLA_POLICY_NESTED(ub_addr_nl_policy),
	[UB_A_TP_KEY] = { .type = NLA_U32, },
	[UB_A_TP_MODE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_FAST_RETRANSMIT] = NLA_POLICY_MAX(NLA_U8, 1),
	[UB_A_TP_MTU] = NLA_POLICY_RANGE(NLA_U32, 256, 4096),
	[UB_A_TP_TRANSPORT] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_OOO_WINDOW] = NLA_POLICY_RANGE(NLA_U32, 128, 2048),
	[UB_A_TP_RTO_STATIC_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_static_us_range),
	[UB_A_TP_RTO_BASE_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_base_us_range),
	[UB_A_TP_RTO_N] = { .type = NLA_U8, },
	[UB_A_TP_RETRY_LIMIT] = { .type = NLA_U8, },
	[UB_A_TP_CC] = NLA_POLICY_MAX(NLA_U32, 2),
	[UB_A_TP_LOAD_BALANCE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_LB_RANGE] = NLA_POLICY_MAX(NLA_U8, 14),
	[UB_A_TP_LB_KEY] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_lb_key_range),
	[UB_A_TP_SEND_WINDOW] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_send_window_range),
};

/* UB_CMD_TP_SET - do */
static const struct nla_policy ub_tp_set_nl_policy[UB_A_TP_SEND_WINDOW + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
	[UB_A_TP_STATE] = NLA_POLICY_MAX(NLA_U32, 5),
	[UB_A_TP_MODE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_FAST_RETRANSMIT] = NLA_POLICY_MAX(NLA_U8, 1),
	[UB_A_TP_MTU] = NLA_POLICY_RANGE(NLA_U32, 256, 4096),
	[UB_A_TP_TRANSPORT] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_OOO_WINDOW] = NLA_POLICY_RANGE(NLA_U32, 128, 2048),
	[UB_A_TP_RTO_STATIC_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_static_us_range),
	[UB_A_TP_RTO_BASE_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_base_us_range),
	[UB_A_TP_RTO_N] = { .type = NLA_U8, },
	[UB_A_TP_RETRY_LIMIT] = { .type = NLA_U8, },
	[UB_A_TP_CC] = NLA_POLICY_MAX(NLA_U32, 2),
	[UB_A_TP_LOAD_BALANCE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_LB_RANGE] = NLA_POLICY_MAX(NLA_U8, 14),
	[UB_A_TP_LB_KEY] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_lb_key_range),
	[UB_A_TP_SEND_WINDOW] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_send_window_range),
};

/* UB_CMD_TP_DEL - do */
static const struct nla_policy ub_tp_del_nl_policy[UB_A_TP_TPN + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
};

/* UB_CMD_TPG_GET - do */
static const struct nla_policy ub_tpg_get_do_nl_policy[UB_A_TP_TPN + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
};

/* UB_CMD_TPG_GET - dump */
static const struct nla_policy ub_tpg_get_dump_nl_policy[UB_A_TP_DEV_INDEX + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
};

/* UB_CMD_TPG_NEW - do */
static const struct nla_policy ub_tpg_new_nl_policy[UB_A_TP_MEMBERS + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_PEER] = NLA_POLICY_NESTED(ub_addr_nl_policy),
	[UB_A_TP_KEY] = { .type = NLA_U32, },
	[UB_A_TP_MODE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_FAST_RETRANSMIT] = NLA_POLICY_MAX(NLA_U8, 1),
	[UB_A_TP_MTU] = NLA_POLICY_RANGE(NLA_U32, 256, 4096),
	[UB_A_TP_TRANSPORT] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_OOO_WINDOW] = NLA_POLICY_RANGE(NLA_U32, 128, 2048),
	[UB_A_TP_RTO_STATIC_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_static_us_range),
	[UB_A_TP_RTO_BASE_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_base_us_range),
	[UB_A_TP_RTO_N] = { .type = NLA_U8, },
	[UB_A_TP_RETRY_LIMIT] = { .type = NLA_U8, },
	[UB_A_TP_CC] = NLA_POLICY_MAX(NLA_U32, 2),
	[UB_A_TP_LOAD_BALANCE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_LB_RANGE] = NLA_POLICY_MAX(NLA_U8, 14),
	[UB_A_TP_LB_KEY] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_lb_key_range),
	[UB_A_TP_SEND_WINDOW] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_send_window_range),
	[UB_A_TP_MEMBERS] = NLA_POLICY_RANGE(NLA_U32, 2, 8),
};

/* UB_CMD_TPG_SET - do */
static const struct nla_policy ub_tpg_set_nl_policy[UB_A_TP_SEND_WINDOW + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
	[UB_A_TP_STATE] = NLA_POLICY_MAX(NLA_U32, 5),
	[UB_A_TP_MODE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_FAST_RETRANSMIT] = NLA_POLICY_MAX(NLA_U8, 1),
	[UB_A_TP_MTU] = NLA_POLICY_RANGE(NLA_U32, 256, 4096),
	[UB_A_TP_TRANSPORT] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_OOO_WINDOW] = NLA_POLICY_RANGE(NLA_U32, 128, 2048),
	[UB_A_TP_RTO_STATIC_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_static_us_range),
	[UB_A_TP_RTO_BASE_US] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_rto_base_us_range),
	[UB_A_TP_RTO_N] = { .type = NLA_U8, },
	[UB_A_TP_RETRY_LIMIT] = { .type = NLA_U8, },
	[UB_A_TP_CC] = NLA_POLICY_MAX(NLA_U32, 2),
	[UB_A_TP_LOAD_BALANCE] = NLA_POLICY_MAX(NLA_U32, 1),
	[UB_A_TP_LB_RANGE] = NLA_POLICY_MAX(NLA_U8, 14),
	[UB_A_TP_LB_KEY] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_lb_key_range),
	[UB_A_TP_SEND_WINDOW] = NLA_POLICY_FULL_RANGE(NLA_U32, &ub_a_tp_send_window_range),
};

/* UB_CMD_TPG_DEL - do */
static const struct nla_policy ub_tpg_del_nl_policy[UB_A_TP_TPN + 1] = {
	[UB_A_TP_DEV_INDEX] = { .type = NLA_U32, },
	[UB_A_TP_TPN] = { .type = NLA_U32, },
};

/* Ops table for ub */
static const struct genl_split_ops ub_nl_ops[] = {
	{
		.cmd		= UB_CMD_DEV_GET,
		.doit		= ub_nl_dev_get_doit,
		.policy		= ub_dev_get_nl_policy,
		.maxattr	= UB_A_DEV_INDEX,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd	= UB_CMD_DEV_GET,
		.dumpit	= ub_nl_dev_get_dumpit,
		.flags	= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= UB_CMD_PORT_GET,
		.doit		= ub_nl_port_get_doit,
		.policy		= ub_port_get_do_nl_policy,
		.maxattr	= UB_A_PORT_INDEX,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_PORT_GET,
		.dumpit		= ub_nl_port_get_dumpit,
		.policy		= ub_port_get_dump_nl_policy,
		.maxattr	= UB_A_PORT_DEV_INDEX,
		.flags		= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= UB_CMD_PORT_SET,
		.doit		= ub_nl_port_set_doit,
		.policy		= ub_port_set_nl_policy,
		.maxattr	= UB_A_PORT_WANT_SHARING,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ADDR_ADD,
		.doit		= ub_nl_addr_add_doit,
		.policy		= ub_addr_add_nl_policy,
		.maxattr	= UB_A_DEV_ADDR,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ADDR_DEL,
		.doit		= ub_nl_addr_del_doit,
		.policy		= ub_addr_del_nl_policy,
		.maxattr	= UB_A_DEV_ADDR,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ROUTE_ADD,
		.doit		= ub_nl_route_add_doit,
		.policy		= ub_route_add_nl_policy,
		.maxattr	= UB_A_ROUTE_LOAD_BALANCE,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ROUTE_DEL,
		.doit		= ub_nl_route_del_doit,
		.policy		= ub_route_del_nl_policy,
		.maxattr	= UB_A_ROUTE_PREFIX_LEN,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ROUTE_GET,
		.dumpit		= ub_nl_route_get_dumpit,
		.policy		= ub_route_get_nl_policy,
		.maxattr	= UB_A_ROUTE_DEV_INDEX,
		.flags		= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= UB_CMD_NPI_SET,
		.doit		= ub_nl_npi_set_doit,
		.policy		= ub_npi_set_nl_policy,
		.maxattr	= UB_A_DEV_NPI,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_ECHO,
		.doit		= ub_nl_echo_doit,
		.policy		= ub_echo_nl_policy,
		.maxattr	= UB_A_ECHO_SIZE,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TP_GET,
		.doit		= ub_nl_tp_get_doit,
		.policy		= ub_tp_get_do_nl_policy,
		.maxattr	= UB_A_TP_TPN,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TP_GET,
		.dumpit		= ub_nl_tp_get_dumpit,
		.policy		= ub_tp_get_dump_nl_policy,
		.maxattr	= UB_A_TP_DEV_INDEX,
		.flags		= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= UB_CMD_TP_NEW,
		.doit		= ub_nl_tp_new_doit,
		.policy		= ub_tp_new_nl_policy,
		.maxattr	= UB_A_TP_SEND_WINDOW,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TP_SET,
		.doit		= ub_nl_tp_set_doit,
		.policy		= ub_tp_set_nl_policy,
		.maxattr	= UB_A_TP_SEND_WINDOW,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TP_DEL,
		.doit		= ub_nl_tp_del_doit,
		.policy		= ub_tp_del_nl_policy,
		.maxattr	= UB_A_TP_TPN,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TPG_GET,
		.doit		= ub_nl_tpg_get_doit,
		.policy		= ub_tpg_get_do_nl_policy,
		.maxattr	= UB_A_TP_TPN,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TPG_GET,
		.dumpit		= ub_nl_tpg_get_dumpit,
		.policy		= ub_tpg_get_dump_nl_policy,
		.maxattr	= UB_A_TP_DEV_INDEX,
		.flags		= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= UB_CMD_TPG_NEW,
		.doit		= ub_nl_tpg_new_doit,
		.policy		= ub_tpg_new_nl_policy,
		.maxattr	= UB_A_TP_MEMBERS,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TPG_SET,
		.doit		= ub_nl_tpg_set_doit,
		.policy		= ub_tpg_set_nl_policy,
		.maxattr	= UB_A_TP_SEND_WINDOW,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= UB_CMD_TPG_DEL,
		.doit		= ub_nl_tpg_del_doit,
		.policy		= ub_tpg_del_nl_policy,
		.maxattr	= UB_A_TP_TPN,
		.flags		= GENL_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
};

static const struct genl_multicast_group ub_nl_mcgrps[] = {
	[UB_NLGRP_MONITOR] = { "monitor", },
};

struct genl_family ub_nl_family __ro_after_init = {
	.name		= UB_FAMILY_NAME,
	.version	= UB_FAMILY_VERSION,
	.netnsok	= true,
	.parallel_ops	= true,
	.module		= THIS_MODULE,
	.split_ops	= ub_nl_ops,
	.n_split_ops	= ARRAY_SIZE(ub_nl_ops),
	.mcgrps		= ub_nl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(ub_nl_mcgrps),
};
