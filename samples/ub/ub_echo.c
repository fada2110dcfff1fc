// SPDX-License-Identifier: GPL-2.0
/*
 * ub_echo: a TP Channel echo service on the in-kernel API (<linux/ub.h>).
 *
 * It listens for channel `key` on UB device `dev` and sends every message
 * it receives back on the same channel, whole and in order. When the peer
 * closes (or the channel fails) it listens again for the next peer. A
 * user-space peer talks to it with `ub-tp echo` (tools/ub-tp).
 *
 *   insmod ub_echo.ko dev=0 key=7
 *   cat /sys/module/ub_echo/parameters/echoed
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/ub.h>
#include <linux/workqueue.h>

static uint dev;
module_param(dev, uint, 0444);
MODULE_PARM_DESC(dev, "UB device index");
static uint key = 7;
module_param(key, uint, 0444);
MODULE_PARM_DESC(key, "the key of the channel to serve");
static ulong echoed;
module_param(echoed, ulong, 0444);
MODULE_PARM_DESC(echoed, "messages echoed so far");

/* Replies the channel could not take yet, in order (at most BACKLOG). */
#define BACKLOG 64

struct pending {
	struct list_head node;
	size_t len;
	u8 data[];
};

static struct {
	struct mutex lock;	/* tp, backlog, queued */
	struct ub_tp *tp;
	struct list_head backlog;
	unsigned int queued;
	struct work_struct relisten;
} echo;

static const struct ub_tp_ops echo_ops;

/* Sends what waits, in order; stops at the first -EAGAIN. Under echo.lock. */
static void flush_backlog(struct ub_tp *tp)
{
	struct pending *p, *n;

	list_for_each_entry_safe(p, n, &echo.backlog, node) {
		int err = ub_tp_send(tp, p->data, p->len);

		if (err == -EAGAIN)
			return;
		if (!err)
			echoed++;
		list_del(&p->node);
		echo.queued--;
		kfree(p);
	}
}

static void echo_recv(struct ub_tp *tp, void *priv, const void *msg, size_t len)
{
	struct pending *p;
	int err = -EAGAIN;

	mutex_lock(&echo.lock);
	if (list_empty(&echo.backlog))
		err = ub_tp_send(tp, msg, len);
	if (!err) {
		echoed++;
	} else if (err == -EAGAIN && echo.queued < BACKLOG) {
		/* Keep the order: behind what waits already. */
		p = kmalloc(struct_size(p, data, len), GFP_KERNEL);
		if (p) {
			p->len = len;
			memcpy(p->data, msg, len);
			list_add_tail(&p->node, &echo.backlog);
			echo.queued++;
		} else {
			pr_warn_ratelimited("ub_echo: out of memory, a reply is lost\n");
		}
	} else {
		pr_warn_ratelimited("ub_echo: reply not sent (%d)\n", err);
	}
	mutex_unlock(&echo.lock);
}

static void echo_writable(struct ub_tp *tp, void *priv)
{
	mutex_lock(&echo.lock);
	flush_backlog(tp);
	mutex_unlock(&echo.lock);
}

static void echo_error(struct ub_tp *tp, void *priv, int err)
{
	pr_info("ub_echo: channel %u ended (%d), %lu echoed\n", key, err, echoed);
	/* Not from our own callback: ub_tp_close() waits for it. */
	schedule_work(&echo.relisten);
}

static int echo_listen(void)
{
	struct ub_tp_bind req = {
		.version = UB_TP_ABI_VERSION,
		.dev_index = dev,
		.key = key,
		.flags = UB_TP_BIND_LISTEN,
		.retransmit = UB_TP_SELECTIVE,
		.attr_flags = UB_TP_FAST_RETRANSMIT,
	};

	return ub_tp_open(&req, &echo_ops, NULL, &echo.tp);
}

static void echo_drop_backlog(void)
{
	struct pending *p, *n;

	list_for_each_entry_safe(p, n, &echo.backlog, node) {
		list_del(&p->node);
		kfree(p);
	}
	echo.queued = 0;
}

/*
 * Takes the handle away under the lock and closes it outside: ub_tp_close()
 * waits for a running callback, which may be waiting for the lock.
 */
static void echo_close(void)
{
	struct ub_tp *tp;

	mutex_lock(&echo.lock);
	tp = echo.tp;
	echo.tp = NULL;
	mutex_unlock(&echo.lock);
	if (tp)
		ub_tp_close(tp);
	mutex_lock(&echo.lock);
	echo_drop_backlog();
	mutex_unlock(&echo.lock);
}

static void echo_relisten(struct work_struct *w)
{
	int err;

	echo_close();
	mutex_lock(&echo.lock);
	err = echo_listen();
	if (err) {
		echo.tp = NULL;
		pr_err("ub_echo: cannot listen again (%d)\n", err);
	}
	mutex_unlock(&echo.lock);
}

static const struct ub_tp_ops echo_ops = {
	.recv = echo_recv,
	.error = echo_error,
	.writable = echo_writable,
};

static int __init ub_echo_init(void)
{
	int err;

	mutex_init(&echo.lock);
	INIT_LIST_HEAD(&echo.backlog);
	INIT_WORK(&echo.relisten, echo_relisten);
	err = echo_listen();
	if (err) {
		pr_err("ub_echo: cannot listen on device %u key %u (%d)\n", dev, key, err);
		return err;
	}
	pr_info("ub_echo: echoing channel %u of device %u\n", key, dev);
	return 0;
}

static void __exit ub_echo_exit(void)
{
	/*
	 * The relisten work may open a new handle: stop it first, close what
	 * is open, then make sure the last callback did not queue it again.
	 */
	cancel_work_sync(&echo.relisten);
	echo_close();
	cancel_work_sync(&echo.relisten);
	echo_close();
	pr_info("ub_echo: stopped, %lu echoed\n", echoed);
}

module_init(ub_echo_init);
module_exit(ub_echo_exit);
MODULE_DESCRIPTION("UB TP Channel echo service (in-kernel API sample)");
MODULE_LICENSE("GPL");
